package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"
)

// ABIVersion is the version of ABI.md this package reads.
const ABIVersion = 0

// DefaultMaxImage bounds an image's size wherever one arrives: a file, a
// registry, a request body. It lives here, beside the reader of images, so
// that every package taking images in can share it.
const DefaultMaxImage = 64 << 20

// Bounds of what Decode reads, far past any real program's (berm's examples
// have manifests of 2 to 8 KiB, parameters under 1 KiB): a schema's compile
// grows faster than its size (256 KiB of properties took 1.6 s, 512 KiB
// 6.5 s), and every deploy, inspect and start of berm serve reads the
// manifest.
const (
	// MaxManifest bounds the .berm.abi section's JSON, in bytes.
	MaxManifest = 1 << 20
	// MaxParameters bounds one tool's parameters schema, in bytes of JSON.
	MaxParameters = 64 << 10
)

// Manifest is what an image says of itself, read from its bytes alone.
type Manifest struct {
	// Usage is the program's own words on when to reach for it (Markdown).
	Usage string `json:"usage"`
	// Tools are the program's tools, in the manifest's order.
	Tools []*Tool `json:"tools"`
	// Syscalls are the host syscalls beyond the core ones that the program
	// declares it will call; only these are linked.
	Syscalls []string `json:"syscalls"`
	// Calls are the "program.tool" targets the program declares it will reach
	// through berm.call; a call to anything else is refused.
	Calls []string `json:"calls"`

	// What the module itself imports and exports, the tables it defines, and
	// the minimum size of its memory in 64 KiB pages.
	Imports     []Import `json:"imports"`
	Exports     []Export `json:"exports"`
	Tables      []Table  `json:"tables"`
	MemoryPages uint64   `json:"memory_pages"`
	// Counts are what else each instance is made of.
	Counts Counts `json:"counts"`
	// Initialize is set when the module exports _initialize, which runs before
	// every tool.
	Initialize bool `json:"initialize"`

	// Raw is the payload of the .berm.abi section, byte for byte.
	Raw json.RawMessage `json:"-"`
}

// Tool returns the named tool, or nil.
func (m *Manifest) Tool(name string) *Tool {
	for _, t := range m.Tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// ToolNames lists the names of the tools in manifest order.
func (m *Manifest) ToolNames() []string {
	names := make([]string, len(m.Tools))
	for i, t := range m.Tools {
		names[i] = t.Name
	}
	return names
}

// Declares reports whether the manifest declares the syscall name.
func (m *Manifest) Declares(syscall string) bool {
	for _, s := range m.Syscalls {
		if s == syscall {
			return true
		}
	}
	return false
}

// MayCall reports whether the manifest declares the "program.tool" target.
func (m *Manifest) MayCall(program, tool string) bool {
	for _, c := range m.Calls {
		if len(c) == len(program)+1+len(tool) && c[:len(program)] == program &&
			c[len(program)] == '.' && c[len(program)+1:] == tool {
			return true
		}
	}
	return false
}

// ToolExportPrefix is prepended to a tool's name to form its export.
const ToolExportPrefix = "berm_tool_"

// Read reads the manifest of a WebAssembly image and checks it against the
// ABI's rules, never compiling or running the module. Every refusal wraps
// ErrInvalid and one of the sentinels of this package.
func Read(image []byte) (*Manifest, error) {
	mod, err := parseModule(image)
	if err != nil {
		return nil, err
	}
	switch len(mod.manifests) {
	case 0:
		return nil, ErrNoManifest
	case 1:
	default:
		return nil, fmt.Errorf("%d sections: %w", len(mod.manifests), ErrManyManifests)
	}
	m, err := Decode(mod.manifests[0])
	if err != nil {
		return nil, err
	}
	m.Imports, m.Exports, m.Tables, m.MemoryPages = mod.imports, mod.exports, mod.tables, mod.memoryPages
	m.Counts = mod.counts
	if err := m.checkModule(); err != nil {
		return nil, err
	}
	return m, nil
}

// rawManifest keeps each field raw so that a wrong type is reported by name.
type rawManifest struct {
	ABIVersion json.RawMessage `json:"abi_version"`
	Usage      json.RawMessage `json:"usage"`
	Tools      json.RawMessage `json:"tools"`
	Syscalls   json.RawMessage `json:"syscalls"`
	Calls      json.RawMessage `json:"calls"`
}

type rawTool struct {
	Name        json.RawMessage `json:"name"`
	Description json.RawMessage `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Decode reads a manifest's JSON alone, as an OCI annotation carries it,
// checking what the JSON can show; the module's facts (imports, exports,
// memory) stay empty, and nothing checks the tools against exports.
func Decode(payload []byte) (*Manifest, error) {
	if len(payload) > MaxManifest {
		return nil, fmt.Errorf("%d bytes, over the limit of %d: %w", len(payload), MaxManifest, ErrTooLarge)
	}
	if !utf8.Valid(payload) {
		return nil, fmt.Errorf("payload is not UTF-8: %w", ErrJSON)
	}
	var raw rawManifest
	if err := strictUnmarshal(payload, &raw); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrJSON)
	}
	if isAbsent(raw.ABIVersion) {
		return nil, fmt.Errorf("abi_version is missing: %w", ErrABIVersion)
	}
	if v := string(bytes.TrimSpace(raw.ABIVersion)); v != "0" {
		return nil, fmt.Errorf("abi_version is %s, want 0: %w", v, ErrABIVersion)
	}
	m := &Manifest{Raw: json.RawMessage(payload), Syscalls: []string{}, Calls: []string{}}
	if err := optional(raw.Usage, &m.Usage); err != nil {
		return nil, fmt.Errorf("usage: %v: %w", err, ErrField)
	}
	if err := optional(raw.Syscalls, &m.Syscalls); err != nil {
		return nil, fmt.Errorf("syscalls: %v: %w", err, ErrField)
	}
	for _, s := range m.Syscalls {
		if !validSyscallName(s) {
			return nil, fmt.Errorf("syscalls: %q: %w", s, ErrSyscallName)
		}
	}
	if err := optional(raw.Calls, &m.Calls); err != nil {
		return nil, fmt.Errorf("calls: %v: %w", err, ErrField)
	}
	for _, c := range m.Calls {
		if _, _, err := SplitFullName(c); err != nil {
			return nil, fmt.Errorf("calls: %q: want program.tool: %w", c, ErrCallName)
		}
	}
	var tools []json.RawMessage
	if err := optional(raw.Tools, &tools); err != nil {
		return nil, fmt.Errorf("tools: %v: %w", err, ErrField)
	}
	if len(tools) == 0 {
		return nil, ErrNoTools
	}
	for i, rt := range tools {
		t, err := decodeTool(i, rt)
		if err != nil {
			return nil, err
		}
		if m.Tool(t.Name) != nil {
			return nil, fmt.Errorf("tool %q: %w", t.Name, ErrDuplicateTool)
		}
		m.Tools = append(m.Tools, t)
	}
	return m, nil
}

func decodeTool(i int, data json.RawMessage) (*Tool, error) {
	var raw rawTool
	if err := strictUnmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tools[%d]: want an object: %w", i, ErrField)
	}
	t := &Tool{}
	if isAbsent(raw.Name) {
		return nil, fmt.Errorf("tools[%d]: name is missing: %w", i, ErrToolName)
	}
	if err := json.Unmarshal(raw.Name, &t.Name); err != nil {
		return nil, fmt.Errorf("tools[%d].name: want a string: %w", i, ErrToolName)
	}
	if !ValidToolName(t.Name) {
		return nil, fmt.Errorf("tool %q: want 1 to 64 characters of [A-Za-z0-9_-]: %w", t.Name, ErrToolName)
	}
	if err := optional(raw.Description, &t.Description); err != nil {
		return nil, fmt.Errorf("tool %q: description: %v: %w", t.Name, err, ErrField)
	}
	if len(raw.Parameters) > MaxParameters {
		return nil, fmt.Errorf("tool %q: parameters: %d bytes, over the limit of %d: %w", t.Name, len(raw.Parameters), MaxParameters, ErrTooLarge)
	}
	if err := t.compileSchema(raw.Parameters); err != nil {
		return nil, fmt.Errorf("tool %q: parameters: %v: %w", t.Name, err, ErrSchema)
	}
	return t, nil
}

// strictUnmarshal decodes one JSON value and refuses trailing data.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// optional decodes a field that may be absent or null, leaving v as it was.
func optional(raw json.RawMessage, v any) error {
	if isAbsent(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			return fmt.Errorf("got %s, want %s", te.Value, te.Type)
		}
		return err
	}
	return nil
}

func (m *Manifest) checkModule() error {
	exports := map[string]Export{}
	for _, e := range m.Exports {
		exports[e.Name] = e
	}
	if e, ok := exports["memory"]; !ok {
		return ErrNoMemory
	} else if e.Kind != KindMemory {
		return fmt.Errorf("export memory is a %s: %w", describe(e), ErrNoMemory)
	}
	if e, ok := exports["_initialize"]; ok {
		if e.Kind != KindFunc || !e.Type.Equal(FuncType{}) {
			return fmt.Errorf("_initialize is a %s: %w", describe(e), ErrInitialize)
		}
		m.Initialize = true
	}
	for _, t := range m.Tools {
		name := ToolExportPrefix + t.Name
		e, ok := exports[name]
		if !ok {
			return fmt.Errorf("tool %q: export %s is missing: %w", t.Name, name, ErrToolExport)
		}
		if e.Kind != KindFunc || !e.Type.Equal(FuncType{}) {
			return fmt.Errorf("tool %q: export %s is a %s: %w", t.Name, name, describe(e), ErrToolExport)
		}
	}
	syscalls := 0
	for _, imp := range m.Imports {
		if imp.Module != "berm" {
			continue
		}
		if imp.Name != "syscall" || imp.Kind != KindFunc {
			return fmt.Errorf("import berm.%s (%s): only berm.syscall may be imported from berm: %w", imp.Name, imp.Kind, ErrBermImport)
		}
		if !imp.Type.Equal(SyscallType) {
			return fmt.Errorf("import berm.syscall is %s, want %s: %w", imp.Type, SyscallType, ErrBermImport)
		}
		if syscalls++; syscalls > 1 {
			return fmt.Errorf("berm.syscall is imported %d times, want at most once: %w", syscalls, ErrBermImport)
		}
	}
	return nil
}

// SyscallType is the signature of the one import from module berm:
// (number i64, ptr i32, len i32) -> i64.
var SyscallType = FuncType{Params: []ValueType{I64, I32, I32}, Results: []ValueType{I64}}

func describe(e Export) string {
	if e.Kind == KindFunc {
		return "function of type " + e.Type.String()
	}
	return e.Kind.String()
}
