// Command hello is berm's example program: it greets, counts its calls in
// its own store, and tells the host's time. It is built as a wasip1 reactor
// (see examples/README.md); its tools are plain functions, so that they test
// on the host against berm.FakeHost.
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	berm "github.com/berm-dev/berm/sdk"
)

// main never runs: a reactor's host calls its tools, after _initialize.
func main() {}

type greetArgs struct {
	Name string `json:"name"`
}

func greetTool(a greetArgs) (string, error) {
	if strings.TrimSpace(a.Name) == "" {
		return "", errors.New(`name is empty: say whom to greet, as in {"name": "Ada"}`)
	}
	return "Hello, " + a.Name + "!", nil
}

// countKey is where count keeps its counter, as decimal text.
const countKey = "count"

func countTool(struct{}) (string, error) {
	n := 0
	if v, ok := berm.Get(countKey); ok {
		var err error
		if n, err = strconv.Atoi(string(v)); err != nil {
			return "", fmt.Errorf("count: the stored value %q is not a number", v)
		}
	}
	n++
	if err := berm.Set(countKey, []byte(strconv.Itoa(n))); err != nil {
		return "", fmt.Errorf("count: %w", err)
	}
	return strconv.Itoa(n), nil
}

func nowTool(struct{}) (string, error) {
	return berm.Now().UTC().Format(time.RFC3339), nil
}
