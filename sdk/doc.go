// Package berm is the guest side of the berm ABI: what a Go program uses to
// read its arguments, give its result or failure, and reach the host's
// syscalls.
//
// A program registers its tools, usage and declared syscalls from package
// initialization, as plain functions, and `berm build` does the rest:
//
//	package main
//
//	import berm "github.com/berm-dev/berm/sdk"
//
//	func init() {
//		berm.Usage("**greeter** greets. Reach for it to test a connection.")
//		berm.Tool("greet", "Greets someone by name.", greet)
//	}
//
//	func main() {}
//
//	type greetArgs struct {
//		Name string `json:"name" jsonschema:"whom to greet"`
//	}
//
//	func greet(a greetArgs) (string, error) { return "Hello, " + a.Name + "!", nil }
//
// (The package is berm; its directory is sdk.) berm build derives the
// manifest from the registrations (each tool's parameters are the JSON
// Schema of its argument type), writes the export of each tool, builds a
// wasip1 reactor and attaches the manifest; see `berm build --help`.
//
// A program may instead export its tools itself and carry a manifest written
// by hand (examples/hello does): one //go:wasmexport berm_tool_<name>
// function per tool, each around Handle (and Warm each from an init
// function), built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o raw.wasm .
//
// and the manifest attached as a .berm.abi custom section (examples/README.md).
//
// Off WebAssembly the package talks to a FakeHost instead, so that a
// program's tools run under plain go test.
//
// berm runs package initialization once per process and starts every call
// from a snapshot of the state it left, so what initialization reads from
// the host is the same at every call: the clock, the environment, and the
// numbers of math/rand's and math/rand/v2's top-level functions. A tool that
// needs fresh randomness asks crypto/rand. (berm deploy --init-each-call
// runs initialization at every call instead.)
//
// Every function here is a syscall of ABI.md, made while a tool runs. During
// _initialize (package initialization, in Go) a host links only berm.log:
// do not call the others from init functions or package-level variables.
// Tool and Warm run the JSON methods of a tool's argument and result types
// then, on zero values; a syscall other than Log from one of them panics
// there, which Warm recovers, rather than trap.
package berm
