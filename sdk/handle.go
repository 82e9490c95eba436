package berm

import "encoding/json"

// Handle runs one tool call through fn: it decodes the arguments into an A,
// and gives fn's result, or fails with its error's message. A string or
// []byte result goes out as it is (text); any other is encoded as JSON.
//
// Call it from the tool's exported function:
//
//	//go:wasmexport berm_tool_greet
//	func greet() { berm.Handle(greetTool) }
func Handle[A, R any](fn func(A) (R, error)) {
	var args A
	if err := json.Unmarshal(Args(), &args); err != nil {
		Fail("arguments: " + err.Error())
		return
	}
	r, err := fn(args)
	if err != nil {
		Fail(err.Error())
		return
	}
	switch r := any(r).(type) {
	case string:
		hostcall(sysResult, text(r), uint32(len(r)))
	case []byte:
		Result(r)
	default:
		b, err := json.Marshal(r)
		if err != nil {
			Fail("result: " + err.Error())
			return
		}
		Result(b)
	}
}
