// Package berm is the guest side of the berm ABI: what a Go program uses to
// read its arguments, give its result or failure, and reach the host's
// syscalls.
//
// A program is a reactor module built for wasip1, with one exported function
// per tool, named berm_tool_<name> to match its manifest:
//
//	//go:build wasip1
//
//	package main
//
//	import berm "github.com/berm-dev/berm/sdk"
//
//	func main() {}
//
//	type greetArgs struct {
//		Name string `json:"name"`
//	}
//
//	//go:wasmexport berm_tool_greet
//	func greet() {
//		berm.Handle(func(a greetArgs) (string, error) {
//			return "Hello, " + a.Name + "!", nil
//		})
//	}
//
// (The package is berm; its directory is sdk.) Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o raw.wasm .
//
// and attach the manifest (a .berm.abi custom section) to make the image; see
// examples/README.md.
//
// Off WebAssembly the package talks to a FakeHost instead, so that a
// program's tools run under plain go test.
//
// Every function here is a syscall of ABI.md, made while a tool runs. During
// _initialize (package initialization, in Go) a host links only berm.log:
// do not call the others from init functions or package-level variables.
package berm
