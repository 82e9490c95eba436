//go:build !wasip1

package berm

import (
	"bytes"
	"errors"
	"hash/fnv"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNumbers(t *testing.T) {
	for name, number := range map[string]uint64{
		"berm.args.len":    sysArgsLen,
		"berm.args.read":   sysArgsRead,
		"berm.result":      sysResult,
		"berm.fail":        sysFail,
		"berm.log":         sysLog,
		"berm.call":        sysCall,
		"berm.result.read": sysResultRead,
		"berm.now":         sysNow,
		"berm.get":         sysGet,
		"berm.set":         sysSet,
		"berm.delete":      sysDelete,
	} {
		h := fnv.New64a()
		h.Write([]byte(name))
		if got := h.Sum64(); got != number {
			t.Errorf("%s: constant 0x%x, FNV-1a 0x%x", name, number, got)
		}
	}
}

func TestFrame(t *testing.T) {
	got := frame([]byte("ab"), nil, []byte("c"))
	want := []byte{2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 1, 0, 0, 0, 'c'}
	if !bytes.Equal(got, want) {
		t.Errorf("frame = %v, want %v", got, want)
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []byte
		want string
	}{
		{"absent", nil, "{}"},
		{"empty object", []byte("{}"), "{}"},
		{"byte for byte", []byte(`{ "name" : "Ada" }`), `{ "name" : "Ada" }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &FakeHost{Args: tc.args}
			var got []byte
			h.Run(func() { got = Args() })
			if string(got) != tc.want {
				t.Errorf("Args() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tool    func()
		result  string
		failed  bool
		failure string
		logs    []string
	}{
		{"nothing", func() {}, "", false, "", nil},
		{"result", func() { Result([]byte("ok")) }, "ok", false, "", nil},
		{"last result", func() { Result([]byte("a")); Result([]byte("b")) }, "b", false, "", nil},
		{"fail", func() { Fail("no") }, "", true, "no", nil},
		{"last failure", func() { Fail("a"); Fail("b") }, "", true, "b", nil},
		{"empty failure", func() { Fail("") }, "", true, "", nil},
		{"logs", func() { Log("one"); Log(""); Log("two") }, "", false, "", []string{"one", "", "two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &FakeHost{Result: []byte("stale"), Logs: []string{"stale"}}
			h.Run(tc.tool)
			if string(h.Result) != tc.result || h.Failed != tc.failed || h.Failure != tc.failure || !reflect.DeepEqual(h.Logs, tc.logs) {
				t.Errorf("outcome = %q %v %q %q, want %q %v %q %q",
					h.Result, h.Failed, h.Failure, h.Logs, tc.result, tc.failed, tc.failure, tc.logs)
			}
		})
	}
}

func TestCall(t *testing.T) {
	h := &FakeHost{Callees: map[string]func([]byte) ([]byte, error){
		"search.query": func(args []byte) ([]byte, error) { return append([]byte("got "), args...), nil },
		"search.empty": func([]byte) ([]byte, error) { return nil, nil },
		"search.fail":  func([]byte) ([]byte, error) { return nil, errors.New("no index") },
		"search.trap": func([]byte) ([]byte, error) {
			return nil, &RefusedError{Syscall: "berm.call", Message: "berm.call search.trap: trapped"}
		},
	}}
	for _, tc := range []struct {
		name    string
		tool    string
		want    string
		callee  string // the message of a *CalleeError
		refused string // the message of a *RefusedError
	}{
		{name: "result", tool: "query", want: `got {"q":1}`},
		{name: "empty result", tool: "empty"},
		{name: "callee failure", tool: "fail", callee: "no index"},
		{name: "refused", tool: "trap", refused: "berm.call search.trap: trapped"},
		{name: "no such tool", tool: "nope", refused: "berm.call search.nope: refused: no such program or tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out []byte
			var err error
			h.Run(func() { out, err = Call("search", tc.tool, []byte(`{"q":1}`)) })
			var callee *CalleeError
			var refused *RefusedError
			switch {
			case tc.callee != "":
				if !errors.As(err, &callee) || errors.As(err, &refused) {
					t.Fatalf("err = %#v, want a *CalleeError only", err)
				}
				if callee.Message != tc.callee || callee.Target != "search."+tc.tool {
					t.Errorf("CalleeError = %+v", callee)
				}
			case tc.refused != "":
				if !errors.As(err, &refused) || errors.As(err, &callee) {
					t.Fatalf("err = %#v, want a *RefusedError only", err)
				}
				if refused.Message != tc.refused || refused.Syscall != "berm.call" {
					t.Errorf("RefusedError = %+v", refused)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if string(out) != tc.want {
				t.Errorf("result = %q, want %q", out, tc.want)
			}
		})
	}
}

func TestStore(t *testing.T) {
	h := &FakeHost{StoreLimit: 16}
	h.Run(func() {
		if v, ok := Get("k"); ok || v != nil {
			t.Errorf("Get of an absent key = %q, %v", v, ok)
		}
		if err := Set("k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := Set("empty", nil); err != nil {
			t.Fatal(err)
		}
	})
	h.Run(func() { // the store outlives the call
		if v, ok := Get("k"); !ok || string(v) != "v" {
			t.Errorf("Get = %q, %v, want v, true", v, ok)
		}
		if v, ok := Get("empty"); !ok || len(v) != 0 {
			t.Errorf("Get of an empty value = %q, %v, want empty, true", v, ok)
		}
		err := Set("big", []byte(strings.Repeat("x", 16)))
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Syscall != "berm.set" || refused.Message == "" {
			t.Errorf("Set past the limit: err = %#v, want a *RefusedError", err)
		}
		Delete("k")
		Delete("absent")
		if _, ok := Get("k"); ok {
			t.Error("Get after Delete found the key")
		}
	})
}

func TestNow(t *testing.T) {
	at := time.Date(2026, 5, 4, 3, 2, 1, 987654321, time.UTC)
	h := &FakeHost{Time: at}
	var got time.Time
	h.Run(func() { got = Now() })
	if want := at.Truncate(time.Millisecond); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
}

func TestStagedReplaced(t *testing.T) {
	h := &FakeHost{
		Store:   map[string][]byte{"k": []byte("value")},
		Callees: map[string]func([]byte) ([]byte, error){"p.t": func([]byte) ([]byte, error) { return []byte("r"), nil }},
	}
	h.Run(func() {
		if out, _ := Call("p", "t", []byte("{}")); string(out) != "r" {
			t.Errorf("Call = %q", out)
		}
		if v, _ := Get("k"); string(v) != "value" {
			t.Errorf("Get = %q", v)
		}
	})
}

func TestNoHost(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Args outside Run did not panic")
		}
	}()
	Args()
}

func TestRefusedErrorMessage(t *testing.T) {
	if got := (&RefusedError{Syscall: "berm.set"}).Error(); got != "berm.set: refused by the host" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&CalleeError{Target: "a.b", Message: "no"}).Error(); got != "a.b: no" {
		t.Errorf("Error() = %q", got)
	}
}
