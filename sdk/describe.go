//go:build !wasip1

package berm

import (
	"encoding"
	"encoding/json"
	"io"
	"reflect"
	"strings"
)

// Describe writes what the program registered (Usage, Syscalls, Calls and
// each Tool with a description of its argument type) as JSON to w. It is
// what `berm build` runs, in a native build of the program, to derive the
// manifest without running the WebAssembly; the format is berm's own and
// changes with it.
func Describe(w io.Writer) error {
	d := description{Usage: registry.usage, Syscalls: registry.syscalls, Calls: registry.calls, Tools: []toolDesc{}}
	for _, t := range registry.tools {
		d.Tools = append(d.Tools, toolDesc{
			Name:        t.name,
			Description: t.description,
			Args:        describeType(t.args, map[reflect.Type]bool{}),
		})
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // descriptions are Markdown: & < > as written
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

type description struct {
	Usage    string     `json:"usage"`
	Syscalls []string   `json:"syscalls,omitempty"`
	Calls    []string   `json:"calls,omitempty"`
	Tools    []toolDesc `json:"tools"`
}

type toolDesc struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Args        *typeDesc `json:"args"`
}

// typeDesc describes a Go type as encoding/json sees it, so that berm can
// rebuild it with reflect and infer its schema.
type typeDesc struct {
	// Kind is reflect.Kind's name ("struct", "ptr", "slice", "int32", ...),
	// or "cycle" for a named type met again inside itself.
	Kind string `json:"kind"`
	// Type is the type's name as Go prints it, for messages.
	Type string `json:"type,omitempty"`
	// As, when set, is what the JSON of the type is whatever its Go shape:
	// "string" (it unmarshals from text), "number" (json.Number), "any"
	// (json.RawMessage), or "custom" (its own UnmarshalJSON: unknown).
	As string `json:"as,omitempty"`
	// Enum lists the values of a type that implements Enum.
	Enum   []any       `json:"enum,omitempty"`
	Len    int         `json:"len,omitempty"`
	Key    *typeDesc   `json:"key,omitempty"`
	Elem   *typeDesc   `json:"elem,omitempty"`
	Fields []fieldDesc `json:"fields,omitempty"`
}

type fieldDesc struct {
	// Name is the Go name, Tag the whole struct tag.
	Name string    `json:"name"`
	Tag  string    `json:"tag,omitempty"`
	Type *typeDesc `json:"type"`
}

var (
	enumType            = reflect.TypeFor[Enum]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// implements reports whether t or *t has the methods of iface, as
// encoding/json finds them on an addressable value.
func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface))
}

func describeType(t reflect.Type, seen map[reflect.Type]bool) *typeDesc {
	d := &typeDesc{Kind: t.Kind().String(), Type: t.String()}
	if t.Name() != "" {
		if seen[t] {
			d.Kind = "cycle"
			return d
		}
		seen[t] = true
		defer delete(seen, t)
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && implements(t, enumType) {
		d.Enum = reflect.New(t).Interface().(Enum).Enum()
	}
	switch {
	case t == reflect.TypeFor[json.RawMessage]():
		d.As = "any"
		return d
	case t == reflect.TypeFor[json.Number]():
		d.As = "number"
		return d
	case t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && implements(t, textUnmarshalerType):
		d.As = "string"
		return d
	case t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && implements(t, jsonUnmarshalerType):
		d.As = "custom"
		return d
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		d.Elem = describeType(t.Elem(), seen)
	case reflect.Array:
		d.Len = t.Len()
		d.Elem = describeType(t.Elem(), seen)
	case reflect.Map:
		if implements(t.Key(), textMarshalerType) {
			d.Key = &typeDesc{Kind: "string", Type: t.Key().String()}
		} else {
			d.Key = &typeDesc{Kind: t.Key().Kind().String(), Type: t.Key().String()}
		}
		d.Elem = describeType(t.Elem(), seen)
	case reflect.Struct:
		d.Fields = []fieldDesc{}
		for _, f := range reflect.VisibleFields(t) {
			if f.Anonymous || !f.IsExported() {
				continue
			}
			if name, _, found := strings.Cut(f.Tag.Get("json"), ","); name == "-" && !found {
				continue
			}
			d.Fields = append(d.Fields, fieldDesc{Name: f.Name, Tag: string(f.Tag), Type: describeType(f.Type, seen)})
		}
	}
	return d
}
