package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var english = message.NewPrinter(language.English)

// ErrArguments is wrapped by every refusal of a call's arguments: not a JSON
// object, or not valid against the tool's parameters. It is the caller's
// error, not the program's, and its message names the field at fault.
var ErrArguments = errors.New("arguments refused")

// Tool is one tool of a program.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of the tool's arguments as the manifest
	// gives it; {"type":"object"} when the manifest gives none.
	Parameters json.RawMessage `json:"parameters"`

	schema *jsonschema.Schema
	// anyObject is set when Parameters accepts every JSON object, so that
	// validation need not build a document tree.
	anyObject bool
}

var defaultParameters = json.RawMessage(`{"type":"object"}`)

// schemaURL is where the tool's schema sits for the compiler (a host that
// can never resolve, .invalid being reserved): references
// resolve against it, and anything outside it has no loader to fetch it.
const schemaURL = "http://berm.invalid/parameters.json"

// uncheckedFormats are the formats the validator knows; ABI.md makes format an
// annotation in every dialect, so each is registered as accepting anything.
var uncheckedFormats = []string{
	"json-pointer", "relative-json-pointer", "uuid", "duration", "period", "ipv4", "ipv6",
	"hostname", "email", "date", "time", "date-time", "uri", "iri", "uri-reference",
	"iri-reference", "uri-template", "semver",
}

func (t *Tool) compileSchema(raw json.RawMessage) error {
	if isAbsent(raw) {
		raw = defaultParameters
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("want a JSON Schema object, got %s", jsonKind(doc))
	}
	if typ, _ := obj["type"].(string); typ != "object" {
		return fmt.Errorf(`want "type": "object"`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for _, f := range uncheckedFormats {
		c.RegisterFormat(&jsonschema.Format{Name: f, Validate: func(any) error { return nil }})
	}
	if err := c.AddResource(schemaURL, doc); err != nil {
		return err
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		var load *jsonschema.LoadURLError
		if errors.As(err, &load) {
			return fmt.Errorf("refers outside itself to %s, which is never fetched", load.URL)
		}
		var invalid *jsonschema.SchemaValidationError
		var ve *jsonschema.ValidationError
		if errors.As(err, &invalid) && errors.As(invalid.Err, &ve) {
			return fmt.Errorf("not a valid JSON Schema: %s", describeViolation(ve))
		}
		// The compiler's messages span lines and name the schema by the URL
		// it sits at here; an error here is one line, about the schema.
		msg := strings.Join(strings.Fields(err.Error()), " ")
		return errors.New(strings.ReplaceAll(msg, schemaURL, "parameters"))
	}
	t.Parameters, t.schema = raw, sch
	t.anyObject = acceptsAnyObject(obj)
	return nil
}

// acceptsAnyObject reports whether a schema says nothing beyond "an object":
// only type and keywords that are pure annotations.
func acceptsAnyObject(obj map[string]any) bool {
	for k := range obj {
		switch k {
		case "type", "$schema", "title", "description", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly":
		default:
			return false
		}
	}
	return true
}

// Validate checks a call's arguments: one JSON object, valid against the
// tool's parameters. The error wraps ErrArguments and names the field.
func (t *Tool) Validate(args []byte) error {
	if t.anyObject {
		trimmed := bytes.TrimLeft(args, " \t\r\n")
		if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(args) {
			return fmt.Errorf("%w: want a JSON object", ErrArguments)
		}
		return nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return fmt.Errorf("%w: not JSON: %v", ErrArguments, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return fmt.Errorf("%w: want a JSON object, got %s", ErrArguments, jsonKind(doc))
	}
	if err := t.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w: %s", ErrArguments, describeViolation(ve))
		}
		return fmt.Errorf("%w: %v", ErrArguments, err)
	}
	return nil
}

// describeViolation flattens the validator's tree into one line per leaf, each
// naming the field by its JSON pointer, so a model can correct its call.
func describeViolation(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			leaves = append(leaves, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(english)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(leaves)
	return strings.Join(leaves, "; ")
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a number"
}
