//go:build !wasip1

package berm

import (
	"encoding"
	"encoding/json"
	"io"
	"reflect"
	"strings"

	"github.com/berm-dev/berm/sdk/describe"
)

// Describe writes what the program registered (Usage, Syscalls, Calls and
// each Tool with a description of its argument type) as JSON to w. It is
// what `berm build` runs, in a native build of the program, to derive the
// manifest without running the WebAssembly; the format (internal/describe)
// is berm's own and changes with it.
func Describe(w io.Writer) error {
	d := describe.Program{Usage: registry.usage, Syscalls: registry.syscalls, Calls: registry.calls, Tools: []describe.Tool{}}
	for _, t := range registry.tools {
		d.Tools = append(d.Tools, describe.Tool{
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

func describeType(t reflect.Type, seen map[reflect.Type]bool) *describe.Type {
	d := &describe.Type{Kind: t.Kind().String(), Type: t.String()}
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
			d.Key = &describe.Type{Kind: "string", Type: t.Key().String()}
		} else {
			d.Key = &describe.Type{Kind: t.Key().Kind().String(), Type: t.Key().String()}
		}
		d.Elem = describeType(t.Elem(), seen)
	case reflect.Struct:
		d.Fields = []describe.Field{}
		for _, f := range reflect.VisibleFields(t) {
			if f.Anonymous || !f.IsExported() {
				continue
			}
			if name, _, found := strings.Cut(f.Tag.Get("json"), ","); name == "-" && !found {
				continue
			}
			d.Fields = append(d.Fields, describe.Field{Name: f.Name, Tag: string(f.Tag), Type: describeType(f.Type, seen)})
		}
	}
	return d
}
