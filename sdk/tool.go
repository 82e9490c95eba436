package berm

import (
	"reflect"
	"slices"
)

// A program registers what its manifest says, from package initialization
// (init functions or package-level variables), and `berm build` derives the
// manifest from the registrations: the usage, each tool with the JSON Schema
// of its argument type, and the syscalls and calls it declares.
//
//	func init() {
//		berm.Usage("**notes** keeps short notes. Reach for it to remember things between sessions.")
//		berm.Syscalls("berm.get", "berm.set")
//		berm.Tool("add", "Adds a note. Reach for it when the user asks you to remember something.", add)
//	}
//
// `berm build` also writes the export of each tool (berm_tool_<name>), so
// that the program has nothing else to say to the host.

// registry is what the program registered. It is written during package
// initialization, on one goroutine, and only read after it.
var registry struct {
	usage    string
	syscalls []string
	calls    []string
	tools    []*tool
}

type tool struct {
	name, description string
	args              reflect.Type
	run               func()
}

// Tool registers a tool: its name (1 to 64 characters of [A-Za-z0-9_-]),
// its description (what it does and when to reach for it; the model reads
// it) and fn, which runs it as Handle does. The tool's parameters are the
// JSON Schema of A, which berm build infers: a struct's exported fields by
// their json names, required unless tagged omitempty or omitzero, described
// by a `jsonschema:"..."` tag; a named type that implements Enum lists its
// values. Registering a name twice replaces the first. Tool Warms fn.
//
// Call it from an init function or a package-level variable.
func Tool[A, R any](name, description string, fn func(A) (R, error)) {
	Warm(fn)
	t := &tool{
		name:        name,
		description: description,
		args:        reflect.TypeFor[A](),
		run:         func() { Handle(fn) },
	}
	for i, old := range registry.tools {
		if old.name == name {
			registry.tools[i] = t
			return
		}
	}
	registry.tools = append(registry.tools, t)
}

// Usage sets the program's usage: Markdown saying what the program is for
// and when to reach for it. Its first paragraph follows every tool's
// description on MCP, and the whole of it is the program's usage resource.
func Usage(markdown string) { registry.usage = markdown }

// Syscalls declares host syscalls, beyond the core ones, that the program
// calls: "berm.get", "berm.set", "berm.delete", "berm.now", "berm.http". A
// host links only the declared ones, and berm build refuses a program that
// calls Get, Set, Delete, Now or HTTP without declaring its syscall.
func Syscalls(names ...string) { registry.syscalls = appendNew(registry.syscalls, names) }

// Calls declares the tools of other programs that the program reaches with
// Call, each as "program.tool". A host refuses a Call to any other target.
func Calls(targets ...string) { registry.calls = appendNew(registry.calls, targets) }

func appendNew(list, add []string) []string {
	for _, s := range add {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// Enum is implemented by a named type whose values are a fixed list: the
// schema of an argument of that type is the enum of Enum's values (as JSON),
// so that the host refuses any other before the tool runs.
//
//	type Unit string
//
//	func (Unit) Enum() []any { return []any{"celsius", "fahrenheit"} }
type Enum interface {
	Enum() []any
}

// Run runs the registered tool called name, as one call: the export that
// berm build writes for each tool is a line around it. An unknown name fails
// the call.
func Run(name string) {
	for _, t := range registry.tools {
		if t.name == name {
			t.run()
			return
		}
	}
	Fail("no tool " + name + " is registered in this program")
}
