// Package describe is the wire format between a Go program and `berm
// build`: what the SDK's berm.Describe writes, in a native build of the
// program, of what it registered (sdk/describe.go), and what berm build
// reads to derive the manifest without running the WebAssembly
// (commands/schema.go). It is berm's own, not for programs to use, and
// changes with it, on both sides at once; it lives in the SDK because the
// SDK's copy that berm writes for a build is a module of its own.
package describe

// Program is what a program registered.
type Program struct {
	Usage    string   `json:"usage"`
	Syscalls []string `json:"syscalls,omitempty"`
	Calls    []string `json:"calls,omitempty"`
	Tools    []Tool   `json:"tools"`
}

// Tool is one registered tool and the type of its argument.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Args        *Type  `json:"args"`
}

// Type describes a Go type as encoding/json sees it, so that berm can
// rebuild it with reflect and infer its schema.
type Type struct {
	// Kind is reflect.Kind's name ("struct", "ptr", "slice", "int32", ...),
	// or "cycle" for a named type met again inside itself.
	Kind string `json:"kind"`
	// Type is the type's name as Go prints it, for messages.
	Type string `json:"type,omitempty"`
	// As, when set, is what the JSON of the type is whatever its Go shape:
	// "string" (it unmarshals from text), "number" (json.Number), "any"
	// (json.RawMessage), or "custom" (its own UnmarshalJSON: unknown).
	As string `json:"as,omitempty"`
	// Enum lists the values of a type that implements the SDK's Enum.
	Enum   []any   `json:"enum,omitempty"`
	Len    int     `json:"len,omitempty"`
	Key    *Type   `json:"key,omitempty"`
	Elem   *Type   `json:"elem,omitempty"`
	Fields []Field `json:"fields,omitempty"`
}

// Field is one field of a struct Type.
type Field struct {
	// Name is the Go name, Tag the whole struct tag.
	Name string `json:"name"`
	Tag  string `json:"tag,omitempty"`
	Type *Type  `json:"type"`
}
