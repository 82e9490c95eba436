//go:build !wasip1

package berm_test

import (
	"errors"
	"fmt"
	"strconv"

	berm "github.com/berm-dev/berm/sdk"
)

type greetArgs struct {
	Name string `json:"name"`
}

// greet is a tool's exported function; in a program it carries
// //go:wasmexport berm_tool_greet.
func greet() {
	berm.Handle(func(a greetArgs) (string, error) {
		if a.Name == "" {
			return "", errors.New("name is empty")
		}
		return "Hello, " + a.Name + "!", nil
	})
}

func ExampleHandle() {
	h := &berm.FakeHost{Args: []byte(`{"name":"Ada"}`)}
	h.Run(greet)
	fmt.Printf("%s\n", h.Result)

	h.Args = []byte(`{"name":""}`)
	h.Run(greet)
	fmt.Println(h.Failed, h.Failure)
	// Output:
	// Hello, Ada!
	// true name is empty
}

func ExampleFakeHost() {
	// count keeps a counter in the program's store.
	count := func() {
		n := 0
		if v, ok := berm.Get("count"); ok {
			n, _ = strconv.Atoi(string(v))
		}
		n++
		if err := berm.Set("count", []byte(strconv.Itoa(n))); err != nil {
			berm.Fail(err.Error())
			return
		}
		berm.Log("counted " + strconv.Itoa(n))
		berm.Result([]byte(strconv.Itoa(n)))
	}
	h := &berm.FakeHost{}
	h.Run(count)
	h.Run(count)
	fmt.Printf("%s %q %q\n", h.Result, h.Store["count"], h.Logs)
	// Output:
	// 2 "2" ["counted 2"]
}

func ExampleCall() {
	h := &berm.FakeHost{Callees: map[string]func([]byte) ([]byte, error){
		"search.query": func([]byte) ([]byte, error) { return nil, errors.New("no index yet") },
	}}
	h.Run(func() {
		_, err := berm.Call("search", "query", []byte(`{"q":"berm"}`))
		var failed *berm.CalleeError
		var refused *berm.RefusedError
		switch {
		case errors.As(err, &failed):
			fmt.Println("the callee failed:", failed.Message)
		case errors.As(err, &refused):
			fmt.Println("the host refused:", refused.Message)
		}
		_, err = berm.Call("search", "nope", []byte(`{}`))
		if errors.As(err, &refused) {
			fmt.Println("the host refused:", refused.Message)
		}
	})
	// Output:
	// the callee failed: no index yet
	// the host refused: berm.call search.nope: refused: no such program or tool
}
