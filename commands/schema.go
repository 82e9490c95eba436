package commands

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/berm-dev/berm/sdk/describe"
)

// errSchema is a tool's argument type that no JSON Schema describes.
var errSchema = errors.New("argument type has no JSON Schema")

// inferSchema infers the parameters of a tool from the description of its
// argument type with jsonschema-go: the type is rebuilt with reflect (as an
// unnamed type of the same shape and tags), and what Go's shape does not say
// (an Enum's values, a type that unmarshals from text) goes in as the
// library's TypeSchemas, keyed by a placeholder type of its own. The result
// is the same bytes for the same type.
func inferSchema(d *describe.Type) ([]byte, error) {
	if err := checkType(d, ""); err != nil {
		return nil, err
	}
	top := d
	for top.Kind == "ptr" {
		top = top.Elem
	}
	if top.As != "" || top.Enum != nil || (top.Kind != "struct" && top.Kind != "map") {
		return nil, fmt.Errorf("%s: the argument of a tool is a JSON object: want a struct or a map with string keys: %w", d.Type, errSchema)
	}
	b := &typeBuilder{schemas: map[reflect.Type]*jsonschema.Schema{}}
	t, err := b.build(d)
	if err != nil {
		return nil, err
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: b.schemas})
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", d.Type, err, errSchema)
	}
	// A pointer argument allows null, which a call's arguments never are.
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	nullEnums(s)
	return json.Marshal(s)
}

// nullEnums adds null to the enum of a schema that allows null (a pointer
// to an Enum type), which the enum would otherwise refuse.
func nullEnums(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if s.Enum != nil && slices.Contains(s.Types, "null") && !slices.Contains(s.Enum, nil) {
		s.Enum = append(s.Enum, nil)
	}
	for _, p := range s.Properties {
		nullEnums(p)
	}
	nullEnums(s.Items)
	nullEnums(s.AdditionalProperties)
}

// checkType refuses, naming the field, what JSON Schema cannot express.
func checkType(d *describe.Type, path string) error {
	at := func(problem string) error {
		if path == "" {
			return fmt.Errorf("%s %s: %w", d.Type, problem, errSchema)
		}
		return fmt.Errorf("field %s (%s) %s: %w", path, d.Type, problem, errSchema)
	}
	switch d.Kind {
	case "cycle":
		return at("contains itself: JSON Schema inference does not follow recursive types")
	case "chan", "func", "complex64", "complex128", "unsafe.Pointer", "uintptr":
		return at("is a " + d.Kind + ", which has no JSON form")
	}
	switch d.As {
	case "custom":
		return at("has its own UnmarshalJSON, so its JSON shape is unknown: use a plain type, or one that unmarshals from text")
	case "":
	default:
		return nil
	}
	switch d.Kind {
	case "ptr", "slice", "array":
		return checkType(d.Elem, path)
	case "map":
		if d.Key.Kind != "string" {
			return at("has keys of type " + d.Key.Type + ": a JSON object's keys are strings")
		}
		return checkType(d.Elem, path+"[…]")
	case "struct":
		for _, f := range d.Fields {
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			if err := checkType(f.Type, p); err != nil {
				return err
			}
		}
	}
	return nil
}

type typeBuilder struct {
	schemas map[reflect.Type]*jsonschema.Schema
}

var kinds = map[string]reflect.Type{
	"bool": reflect.TypeFor[bool](), "string": reflect.TypeFor[string](),
	"int": reflect.TypeFor[int](), "int8": reflect.TypeFor[int8](), "int16": reflect.TypeFor[int16](),
	"int32": reflect.TypeFor[int32](), "int64": reflect.TypeFor[int64](),
	"uint": reflect.TypeFor[uint](), "uint8": reflect.TypeFor[uint8](), "uint16": reflect.TypeFor[uint16](),
	"uint32": reflect.TypeFor[uint32](), "uint64": reflect.TypeFor[uint64](),
	"float32": reflect.TypeFor[float32](), "float64": reflect.TypeFor[float64](),
	"interface": reflect.TypeFor[any](),
}

func (b *typeBuilder) build(d *describe.Type) (reflect.Type, error) {
	switch {
	case d.As == "any":
		return reflect.TypeFor[any](), nil
	case d.As == "string" || d.As == "number":
		s := &jsonschema.Schema{Type: d.As}
		if d.Enum != nil {
			s.Enum = d.Enum
		}
		return b.placeholder(s), nil
	}
	var t reflect.Type
	switch d.Kind {
	case "ptr":
		e, err := b.build(d.Elem)
		if err != nil {
			return nil, err
		}
		t = reflect.PointerTo(e)
	case "slice":
		e, err := b.build(d.Elem)
		if err != nil {
			return nil, err
		}
		t = reflect.SliceOf(e)
	case "array":
		e, err := b.build(d.Elem)
		if err != nil {
			return nil, err
		}
		t = reflect.ArrayOf(d.Len, e)
	case "map":
		e, err := b.build(d.Elem)
		if err != nil {
			return nil, err
		}
		t = reflect.MapOf(kinds["string"], e)
	case "struct":
		fields := make([]reflect.StructField, 0, len(d.Fields))
		for i, f := range d.Fields {
			ft, err := b.build(f.Type)
			if err != nil {
				return nil, err
			}
			// The rebuilt field's Go name is its index: json names come
			// from the tag, which gets the Go name where it had none.
			fields = append(fields, reflect.StructField{Name: "F" + strconv.Itoa(i), Type: ft, Tag: rebuildTag(f)})
		}
		t = reflect.StructOf(fields)
	default:
		k, ok := kinds[d.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: kind %s: %w", d.Type, d.Kind, errSchema)
		}
		t = k
	}
	if d.Enum == nil {
		return t, nil
	}
	// An enum is the schema of its Go shape with the values added.
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: b.schemas})
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", d.Type, err, errSchema)
	}
	s.Enum = d.Enum
	return b.placeholder(s), nil
}

// placeholder is a type of its own that stands for schema s.
func (b *typeBuilder) placeholder(s *jsonschema.Schema) reflect.Type {
	t := reflect.StructOf([]reflect.StructField{{Name: "P" + strconv.Itoa(len(b.schemas)), Type: reflect.TypeFor[struct{}]()}})
	b.schemas[t] = s
	return t
}

// rebuildTag keeps what jsonschema-go reads of a field's tag: its json tag,
// named, and its jsonschema tag.
func rebuildTag(f describe.Field) reflect.StructTag {
	tag := reflect.StructTag(f.Tag)
	name, rest, _ := strings.Cut(tag.Get("json"), ",")
	if name == "" {
		name = f.Name
	}
	js := name
	if rest != "" {
		js += "," + rest
	}
	out := "json:" + strconv.Quote(js)
	if d, ok := tag.Lookup("jsonschema"); ok {
		out += " jsonschema:" + strconv.Quote(d)
	}
	return reflect.StructTag(out)
}
