package manifest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/berm-dev/berm/manifest"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadEcho(t *testing.T) {
	m, err := manifest.Read(readFixture(t, "echo.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.ToolNames(); len(got) != 1 || got[0] != "echo" {
		t.Fatalf("tools = %v, want [echo]", got)
	}
	if !strings.Contains(m.Usage, "echoes") {
		t.Errorf("usage = %q", m.Usage)
	}
	if len(m.Syscalls) != 0 || len(m.Calls) != 0 {
		t.Errorf("syscalls %v, calls %v: want none", m.Syscalls, m.Calls)
	}
	if len(m.Imports) != 1 || m.Imports[0].Module != "berm" || m.Imports[0].Name != "syscall" {
		t.Errorf("imports = %+v", m.Imports)
	}
	if m.MemoryPages != 1 || m.Initialize {
		t.Errorf("memory pages %d, initialize %v", m.MemoryPages, m.Initialize)
	}
	var raw map[string]any
	if err := json.Unmarshal(m.Raw, &raw); err != nil || raw["abi_version"] != float64(0) {
		t.Errorf("raw = %s (%v)", m.Raw, err)
	}
}

// module builds a minimal module: memory exported, one tool export of the
// given type, and the manifest payload.
func module(t *testing.T, payload string) []byte {
	t.Helper()
	// (module (memory (export "memory") 1) (func (export "berm_tool_t")))
	base := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type section: [] -> []
		0x03, 0x02, 0x01, 0x00, // function section: one func of type 0
		0x05, 0x03, 0x01, 0x00, 0x01, // memory section: min 1
		0x07, 0x18, 0x02, // export section, 2 exports
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x0b, 'b', 'e', 'r', 'm', '_', 't', 'o', 'o', 'l', '_', 't', 0x00, 0x00,
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code section
	}
	return manifest.AppendSection(base, []byte(payload))
}

func TestReadManifestFields(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    error
	}{
		{"minimal", `{"abi_version":0,"tools":[{"name":"t"}]}`, nil},
		{"unknown fields ignored", `{"abi_version":0,"tools":[{"name":"t","x":1}],"future":true}`, nil},
		{"all fields", `{"abi_version":0,"usage":"u","tools":[{"name":"t","description":"d","parameters":{"type":"object"}}],"syscalls":["berm.get"],"calls":["other.tool"]}`, nil},
		{"draft-07 schema", `{"abi_version":0,"tools":[{"name":"t","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}}]}`, nil},
		{"internal ref", `{"abi_version":0,"tools":[{"name":"t","parameters":{"type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}}]}`, nil},
		{"abi_version missing", `{"tools":[{"name":"t"}]}`, manifest.ErrABIVersion},
		{"abi_version 1", `{"abi_version":1,"tools":[{"name":"t"}]}`, manifest.ErrABIVersion},
		{"abi_version 0.0", `{"abi_version":0.0,"tools":[{"name":"t"}]}`, manifest.ErrABIVersion},
		{"abi_version string", `{"abi_version":"0","tools":[{"name":"t"}]}`, manifest.ErrABIVersion},
		{"not JSON", `{"abi_version":0,`, manifest.ErrJSON},
		{"trailing data", `{"abi_version":0,"tools":[{"name":"t"}]} {}`, manifest.ErrJSON},
		{"not an object", `[]`, manifest.ErrJSON},
		{"no tools", `{"abi_version":0}`, manifest.ErrNoTools},
		{"empty tools", `{"abi_version":0,"tools":[]}`, manifest.ErrNoTools},
		{"tools not array", `{"abi_version":0,"tools":{}}`, manifest.ErrField},
		{"usage not string", `{"abi_version":0,"usage":3,"tools":[{"name":"t"}]}`, manifest.ErrField},
		{"tool name missing", `{"abi_version":0,"tools":[{}]}`, manifest.ErrToolName},
		{"tool name dotted", `{"abi_version":0,"tools":[{"name":"a.b"}]}`, manifest.ErrToolName},
		{"tool name 65", `{"abi_version":0,"tools":[{"name":"` + strings.Repeat("a", 65) + `"}]}`, manifest.ErrToolName},
		{"duplicate tool", `{"abi_version":0,"tools":[{"name":"t"},{"name":"t"}]}`, manifest.ErrDuplicateTool},
		{"tool without export", `{"abi_version":0,"tools":[{"name":"t"},{"name":"u"}]}`, manifest.ErrToolExport},
		{"schema type string", `{"abi_version":0,"tools":[{"name":"t","parameters":{"type":"string"}}]}`, manifest.ErrSchema},
		{"schema no type", `{"abi_version":0,"tools":[{"name":"t","parameters":{}}]}`, manifest.ErrSchema},
		{"schema boolean", `{"abi_version":0,"tools":[{"name":"t","parameters":true}]}`, manifest.ErrSchema},
		{"schema invalid", `{"abi_version":0,"tools":[{"name":"t","parameters":{"type":"object","properties":5}}]}`, manifest.ErrSchema},
		{"schema external ref", `{"abi_version":0,"tools":[{"name":"t","parameters":{"type":"object","$ref":"https://example.com/s.json"}}]}`, manifest.ErrSchema},
		{"schema relative ref", `{"abi_version":0,"tools":[{"name":"t","parameters":{"type":"object","$ref":"other.json"}}]}`, manifest.ErrSchema},
		{"syscall name empty", `{"abi_version":0,"tools":[{"name":"t"}],"syscalls":[""]}`, manifest.ErrSyscallName},
		{"call without dot", `{"abi_version":0,"tools":[{"name":"t"}],"calls":["nodot"]}`, manifest.ErrCallName},
		{"call with bad program", `{"abi_version":0,"tools":[{"name":"t"}],"calls":["Bad.t"]}`, manifest.ErrCallName},
		{"not UTF-8", "{\"abi_version\":0,\"usage\":\"\xff\",\"tools\":[{\"name\":\"t\"}]}", manifest.ErrJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Read(module(t, tt.payload))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) || !errors.Is(err, manifest.ErrInvalid) {
				t.Fatalf("err = %v, want %v (and ErrInvalid)", err, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	payload := `{"abi_version":0,"tools":[{"name":"t","parameters":{"type":"object",
		"properties":{"n":{"type":"integer"},"when":{"type":"string","format":"date-time"}},
		"required":["n"],"additionalProperties":false}}]}`
	m, err := manifest.Read(module(t, payload))
	if err != nil {
		t.Fatal(err)
	}
	tool := m.Tool("t")
	tests := []struct {
		args  string
		field string // the refusal names this; "" when accepted
	}{
		{`{"n":1}`, ""},
		{` {"n": 1} `, ""},
		{`{"n":1,"when":"not a date"}`, ""}, // format is an annotation
		{`{"n":"x"}`, "/n"},
		{`{}`, "n"},
		{`{"n":1,"extra":true}`, "extra"},
		{`[1]`, "JSON object"},
		{`{"n":1`, "not JSON"},
		{`{"n":1} {}`, "not JSON"},
		{``, "not JSON"},
	}
	for _, tt := range tests {
		err := tool.Validate([]byte(tt.args))
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("Validate(%s) = %v, want nil", tt.args, err)
		case tt.field != "" && (!errors.Is(err, manifest.ErrArguments) || !strings.Contains(err.Error(), tt.field)):
			t.Errorf("Validate(%s) = %v, want ErrArguments naming %q", tt.args, err, tt.field)
		}
	}
}

func TestValidateAnyObject(t *testing.T) {
	m, err := manifest.Read(module(t, `{"abi_version":0,"tools":[{"name":"t"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for args, ok := range map[string]bool{`{}`: true, ` {"a":[1,2]}`: true, `[]`: false, `"x"`: false, `{`: false, `{} x`: false, ``: false} {
		if err := m.Tool("t").Validate([]byte(args)); (err == nil) != ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", args, err, ok)
		}
	}
}

func TestProgramNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "hello": true, "hello-world": true, "0day": true, strings.Repeat("a", 63): true,
		"": false, "-a": false, "Hello": false, "a_b": false, "a.b": false, strings.Repeat("a", 64): false, "é": false,
	} {
		if err := manifest.CheckProgramName(name); (err == nil) != ok {
			t.Errorf("CheckProgramName(%q) = %v, want ok=%v", name, err, ok)
		} else if err != nil && !errors.Is(err, manifest.ErrProgramName) {
			t.Errorf("CheckProgramName(%q) = %v, want ErrProgramName", name, err)
		}
	}
}

func TestServedNames(t *testing.T) {
	m, err := manifest.Read(module(t, `{"abi_version":0,"tools":[{"name":"t"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckServedNames(strings.Repeat("p", 62)); err != nil { // 62 + "_t" = 64
		t.Errorf("64 characters refused: %v", err)
	}
	err = m.CheckServedNames(strings.Repeat("p", 63)) // 65
	if !errors.Is(err, manifest.ErrServedName) || !strings.Contains(err.Error(), strings.Repeat("p", 63)+"_t") {
		t.Errorf("65 characters: %v, want ErrServedName naming the name", err)
	}
	if p, tool, ok := manifest.SplitServedName("my-prog_some_tool"); !ok || p != "my-prog" || tool != "some_tool" {
		t.Errorf("SplitServedName = %q %q %v", p, tool, ok)
	}
}

func TestAttachReplacesSections(t *testing.T) {
	image := module(t, `{"abi_version":0,"tools":[{"name":"t"}]}`)
	twice := manifest.AppendSection(image, []byte(`{}`))
	if _, err := manifest.Read(twice); !errors.Is(err, manifest.ErrManyManifests) {
		t.Fatalf("two sections: %v", err)
	}
	fixed, err := manifest.Attach(twice, []byte(`{"abi_version":0,"usage":"again","tools":[{"name":"t"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(fixed)
	if err != nil || m.Usage != "again" {
		t.Fatalf("attached: %+v, %v", m, err)
	}
	stripped, _ := manifest.Strip(fixed)
	if _, err := manifest.Read(stripped); !errors.Is(err, manifest.ErrNoManifest) {
		t.Fatalf("stripped: %v", err)
	}
}

func TestDigest(t *testing.T) {
	// sha256 of the empty string.
	if got := manifest.Digest(nil); got != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatal(got)
	}
}

// withTables is module's image with a table section of the given payload
// between its function and memory sections.
func withTables(t *testing.T, tables ...byte) []byte {
	t.Helper()
	m := module(t, `{"abi_version": 0, "tools": [{"name": "t"}]}`)
	const afterFunctions = 18 // the header, the type and function sections
	out := append([]byte{}, m[:afterFunctions]...)
	out = append(out, 0x04, byte(len(tables)))
	out = append(out, tables...)
	return append(out, m[afterFunctions:]...)
}

func TestReadTables(t *testing.T) {
	max := func(n uint64) *uint64 { return &n }
	tests := []struct {
		name    string
		section []byte
		want    []manifest.Table
	}{
		{"none", nil, []manifest.Table{}},
		{"no maximum", []byte{0x01, 0x70, 0x00, 0x01}, []manifest.Table{{Min: 1}}},
		{"a maximum", []byte{0x01, 0x6f, 0x01, 0x02, 0x0a}, []manifest.Table{{Min: 2, Max: max(10)}}},
		{"u32 bounds", []byte{0x01, 0x70, 0x01, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f},
			[]manifest.Table{{Min: 0, Max: max(1<<32 - 1)}}},
		{"(ref null func)", []byte{0x01, 0x63, 0x70, 0x00, 0x04}, []manifest.Table{{Min: 4}}},
		// 0x40 0x00: a table with an initializer (ref.null func), then another.
		{"initializer", []byte{0x02, 0x40, 0x00, 0x70, 0x01, 0x01, 0x05, 0xd0, 0x70, 0x0b, 0x70, 0x00, 0x03},
			[]manifest.Table{{Min: 1, Max: max(5)}, {Min: 3}}},
		{"extended-const initializer", []byte{0x02,
			0x40, 0x00, 0x70, 0x00, 0x01, 0x41, 0x7f, 0x41, 0x01, 0x6a, 0xd2, 0x00, 0x0b,
			0x70, 0x00, 0x07},
			[]manifest.Table{{Min: 1}, {Min: 7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			image := module(t, `{"abi_version": 0, "tools": [{"name": "t"}]}`)
			if tt.section != nil {
				image = withTables(t, tt.section...)
			}
			m, err := manifest.Read(image)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(m.Tables)
			want, _ := json.Marshal(tt.want)
			if string(got) != string(want) {
				t.Fatalf("tables = %s, want %s", got, want)
			}
		})
	}

	m, err := manifest.Read(readFixture(t, "../examples/hello/hello.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	// Go's linker declares one table, of its functions, without a maximum.
	if len(m.Tables) != 1 || m.Tables[0].Max != nil || m.Tables[0].Min < 1000 {
		t.Errorf("hello: tables = %+v", m.Tables)
	}
	out, _ := json.Marshal(m)
	if !strings.Contains(string(out), `"tables":[{"min":`) {
		t.Errorf("JSON names no tables: %.300s", out)
	}
}

func TestReadTablesMalformed(t *testing.T) {
	for name, section := range map[string][]byte{
		"truncated limits":          {0x01, 0x70, 0x01, 0x01},
		"bad flags":                 {0x01, 0x70, 0x08, 0x01},
		"more tables than entries":  {0x02, 0x70, 0x00, 0x01},
		"initializer's reserved":    {0x01, 0x40, 0x01, 0x70, 0x00, 0x01, 0xd0, 0x70, 0x0b},
		"initializer without end":   {0x01, 0x40, 0x00, 0x70, 0x00, 0x01, 0xd0, 0x70},
		"unknown initializer":       {0x01, 0x40, 0x00, 0x70, 0x00, 0x01, 0x20, 0x00, 0x0b},
		"unterminated heap type":    {0x01, 0x63, 0xff, 0xff},
		"unterminated i64.const":    {0x01, 0x40, 0x00, 0x70, 0x00, 0x01, 0x42, 0x80, 0x80},
		"v128 sub-opcode not const": {0x01, 0x40, 0x00, 0x70, 0x00, 0x01, 0xfd, 0x0d, 0x0b},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := manifest.Read(withTables(t, section...))
			if !errors.Is(err, manifest.ErrMalformed) || !strings.Contains(err.Error(), "table section") {
				t.Fatalf("err = %v, want a malformed table section", err)
			}
		})
	}
}

// BenchmarkValidate is the check of one call's arguments against the echo
// fixture's parameters, a schema with one property, as each tools/call makes
// it: the schema was compiled when the manifest was read, so this is the
// validation alone.
func BenchmarkValidate(b *testing.B) {
	m, err := manifest.Read(readFixture(b, "echo.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	tool, args := m.Tool("echo"), []byte(`{"message":"hi"}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := tool.Validate(args); err != nil {
			b.Fatal(err)
		}
	}
}

// moduleWith is a module of one tool, t, with the given sections (by id)
// added to or replacing its own, in the order the binary format requires.
func moduleWith(t *testing.T, sections map[byte][]byte) []byte {
	t.Helper()
	own := map[byte][]byte{
		1:  {0x01, 0x60, 0x00, 0x00}, // [] -> []
		3:  {0x01, 0x00},             // one function of type 0
		5:  {0x01, 0x00, 0x01},       // memory, min 1
		7:  append(append([]byte{0x02, 0x06}, "memory\x02\x00\x0b"...), "berm_tool_t\x00\x00"...),
		10: {0x01, 0x02, 0x00, 0x0b},
	}
	for id, payload := range sections {
		own[id] = payload
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	// Data count (12) goes before code (10), data (11) after it.
	for _, id := range []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 10, 11} {
		if p, ok := own[id]; ok {
			out = append(out, id)
			out = appendULEB(out, uint64(len(p)))
			out = append(out, p...)
		}
	}
	return manifest.AppendSection(out, []byte(`{"abi_version": 0, "tools": [{"name": "t"}]}`))
}

func appendULEB(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestReadCounts reads what each instance is made of: every encoding of an
// element segment (flags 0 to 7, padded flags, typed references), globals,
// data segments and functions, as wazero decodes them.
func TestReadCounts(t *testing.T) {
	i32 := []byte{0x41, 0x00, 0x0b}     // i32.const 0
	refFunc := []byte{0xd2, 0x00, 0x0b} // ref.func 0
	refNull := []byte{0xd0, 0x70, 0x0b} // ref.null func
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name     string
		sections map[byte][]byte
		want     manifest.Counts
	}{
		{"none", nil, manifest.Counts{Functions: 1}},
		{"functions", map[byte][]byte{3: {0x03, 0x00, 0x00, 0x00}, 10: {0x03, 0x02, 0x00, 0x0b, 0x02, 0x00, 0x0b, 0x02, 0x00, 0x0b}},
			manifest.Counts{Functions: 3}},
		{"globals", map[byte][]byte{6: {0x02, 0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7e, 0x00, 0x42, 0x00, 0x0b}},
			manifest.Counts{Functions: 1, Globals: 2}},
		{"data", map[byte][]byte{11: cat([]byte{0x03, 0x00}, i32, []byte{0x01, 'a', 0x01, 0x00, 0x02, 0x00}, i32, []byte{0x00})},
			manifest.Counts{Functions: 1, DataSegments: 3}},
		{"active, table 0 (flags 0)", map[byte][]byte{9: cat([]byte{0x01, 0x00}, i32, []byte{0x02, 0x00, 0x00})},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 2}},
		{"passive (flags 1)", map[byte][]byte{9: {0x01, 0x01, 0x00, 0x03, 0x00, 0x00, 0x00}},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 3}},
		{"active, a table index (flags 2)", map[byte][]byte{9: cat([]byte{0x01, 0x02, 0x00}, i32, []byte{0x00, 0x01, 0x00})},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 1}},
		{"declarative (flags 3)", map[byte][]byte{9: {0x01, 0x03, 0x00, 0x02, 0x00, 0x00}},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 2}},
		{"active, expressions (flags 4)", map[byte][]byte{9: cat([]byte{0x01, 0x04}, i32, []byte{0x02}, refFunc, refNull)},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 2}},
		{"passive, expressions (flags 5)", map[byte][]byte{9: cat([]byte{0x01, 0x05, 0x70, 0x01}, refFunc)},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 1}},
		{"active, a table index, expressions (flags 6)", map[byte][]byte{9: cat([]byte{0x01, 0x06, 0x00}, i32, []byte{0x70, 0x01}, refNull)},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 1}},
		{"declarative, (ref null func) expressions (flags 7)", map[byte][]byte{9: cat([]byte{0x01, 0x07, 0x63, 0x70, 0x01}, refFunc)},
			manifest.Counts{Functions: 1, ElementSegments: 1, ElementEntries: 1}},
		{"padded flags, an empty segment", map[byte][]byte{9: {0x02, 0x81, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00}},
			manifest.Counts{Functions: 1, ElementSegments: 2, ElementEntries: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := manifest.Read(moduleWith(t, tt.sections))
			if err != nil {
				t.Fatal(err)
			}
			if m.Counts != tt.want {
				t.Fatalf("counts %+v, want %+v", m.Counts, tt.want)
			}
		})
	}

	// Go's linker: a table of every function, its memory as tens of
	// thousands of segments.
	m, err := manifest.Read(readFixture(t, "../examples/hello/hello.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Counts; c.Functions < 1000 || c.ElementSegments != 1 || c.ElementEntries < 1000 ||
		c.Globals < 1 || c.DataSegments < 10000 {
		t.Errorf("hello: counts %+v", c)
	}
	out, _ := json.Marshal(m)
	if !strings.Contains(string(out), `"counts":{"functions":`) {
		t.Errorf("JSON has no counts: %.300s", out)
	}
}

func TestReadCountsMalformed(t *testing.T) {
	for name, tt := range map[string]struct {
		id      byte
		section []byte
		where   string
	}{
		"unknown element flags":          {9, []byte{0x01, 0x08, 0x00, 0x00}, "element section"},
		"more entries than bytes":        {9, []byte{0x01, 0x01, 0x00, 0x05, 0x00}, "element section"},
		"an unknown entry instruction":   {9, []byte{0x01, 0x05, 0x70, 0x01, 0x20, 0x00, 0x0b}, "element section"},
		"an offset without end":          {9, []byte{0x01, 0x00, 0x41, 0x00}, "element section"},
		"more segments than bytes":       {9, []byte{0x03, 0x01, 0x00, 0x00}, "element section"},
		"more globals than bytes":        {6, []byte{0x09, 0x7f, 0x00, 0x41, 0x00, 0x0b}, "global section"},
		"more data segments than bytes":  {11, []byte{0x05, 0x01, 0x00}, "data section"},
		"a count past 32 bits (globals)": {6, []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, "global section"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := manifest.Read(moduleWith(t, map[byte][]byte{tt.id: tt.section}))
			if !errors.Is(err, manifest.ErrMalformed) || !strings.Contains(err.Error(), tt.where) {
				t.Fatalf("err = %v, want a malformed %s", err, tt.where)
			}
		})
	}
}

// vec is a vector of n copies of item.
func vec(n int, item ...byte) []byte {
	out := appendULEB(nil, uint64(n))
	for range n {
		out = append(out, item...)
	}
	return out
}

// TestReadTooMany: past the most of a part that berm reads, which it would
// hold decoded, Read refuses the image at once, naming the section, the
// count and the most; at the most, it reads it.
func TestReadTooMany(t *testing.T) {
	const most, functions = 1 << 16, 1 << 20
	tests := []struct {
		name string
		id   byte
		item []byte
		n    int
		want string // of the refusal; "" when it reads
	}{
		{"types", 1, []byte{0x60, 0x00, 0x00}, most + 1, "type section: 65537 types, over the limit of 65536"},
		{"types at the most", 1, []byte{0x60, 0x00, 0x00}, most, ""},
		{"imports", 2, []byte{0x00, 0x00, 0x00, 0x00}, most + 1, "import section: 65537 imports, over the limit of 65536"},
		{"functions", 3, []byte{0x00}, functions + 1, "function section: 1048577 functions, over the limit of 1048576"},
		{"tables", 4, []byte{0x70, 0x00, 0x00}, most + 1, "table section: 65537 tables, over the limit of 65536"},
		{"exports", 7, []byte{0x00, 0x00, 0x00}, most + 1, "export section: 65537 exports, over the limit of 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Read(moduleWith(t, map[byte][]byte{tt.id: vec(tt.n, tt.item...)}))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, manifest.ErrTooMany) || !errors.Is(err, manifest.ErrInvalid) || errors.Is(err, manifest.ErrMalformed) ||
				!strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrTooMany saying %q", err, tt.want)
			}
		})
	}

	// 20 million types, which took 900 MB to read, are refused without
	// decoding one. (Not parallel: this measures the process's allocations.)
	image := moduleWith(t, map[byte][]byte{1: vec(20_000_000, 0x60, 0x00, 0x00)})
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	_, err := manifest.Read(image)
	goruntime.ReadMemStats(&after)
	if !errors.Is(err, manifest.ErrTooMany) {
		t.Fatalf("20 million types: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("reading 20 million types allocated %d KiB", n>>10)
	}
}

// TestDecodeTooLarge: a manifest past MaxManifest, and a tool's parameters
// past MaxParameters, are refused before any schema is compiled (one of
// 512 KiB of properties took 6.5 s to compile); at the bounds they read.
func TestDecodeTooLarge(t *testing.T) {
	t.Parallel()
	// properties is a parameters schema of at least n bytes.
	properties := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		for i := 0; b.Len() < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	// fit pads a parameters schema to exactly n bytes with spaces.
	fit := func(n int) string {
		s := properties(n - 1000)
		return s[:len(s)-1] + strings.Repeat(" ", n-len(s)) + "}"
	}
	tool := func(name, params string) string {
		return `{"name":"` + name + `","parameters":` + params + `}`
	}
	manifestOf := func(tools ...string) []byte {
		return []byte(`{"abi_version":0,"tools":[` + strings.Join(tools, ",") + `]}`)
	}
	var many []string
	for i := 0; i < 17; i++ {
		many = append(many, tool(fmt.Sprintf("t%d", i), fit(manifest.MaxParameters)))
	}
	tests := []struct {
		name    string
		payload []byte
		want    string // of the refusal; "" when it reads
	}{
		{"parameters at the bound", manifestOf(tool("t", fit(manifest.MaxParameters))), ""},
		{"parameters past the bound", manifestOf(tool("t", fit(manifest.MaxParameters+1))), `tool "t": parameters: 65537 bytes, over the limit of 65536`},
		{"manifest past the bound", manifestOf(many...), "over the limit of 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Decode(tt.payload)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, manifest.ErrTooLarge) || !errors.Is(err, manifest.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrTooLarge saying %q", err, tt.want)
			}
		})
	}
}

// TestReadCompileCost: code shaped to cost wazero's compiler far more than
// its size is refused at Read, before any compile, naming the function and
// the bound (30,000 ifs in a row, 150 KB, took 23 s to compile); code of
// the same kind within the bounds reads, as do Go's and LLVM's.
func TestReadCompileCost(t *testing.T) {
	t.Parallel()
	// code is a code section of one function: its locals, then body
	// repeated n times, then end.
	code := func(locals []byte, n int, body ...byte) []byte {
		fn := append([]byte(nil), locals...)
		for range n {
			fn = append(fn, body...)
		}
		fn = append(fn, 0x0b)
		return append(appendULEB([]byte{0x01}, uint64(len(fn))), fn...)
	}
	noLocals := []byte{0x00}
	ifThen := []byte{0x41, 0x00, 0x04, 0x40, 0x0b} // i32.const 0; if; end
	tests := []struct {
		name string
		code []byte
		want string // of the refusal; "" when it reads
	}{
		{"ifs", code(noLocals, 30_000, ifThen...), "30001 blocks and branches (the deadline's own included) carrying 0 values (locals, parameters, results) weigh 900060001, over the limit of 67108864"},
		{"locals and no block", code([]byte{0x01, 0xe8, 0xfb, 0x03, 0x7b}, 0), "carrying 65000 values"},
		// 32,588 locals of v128 took 5 s; 8,000 locals and 16 memory.fill,
		// which the deadline's rewrite puts behind an if and an else, minutes.
		{"v128 locals", code([]byte{0x01, 0xcc, 0xfe, 0x01, 0x7b}, 0), "carrying 32588 values"},
		{"memory.fill", code([]byte{0x01, 0xc0, 0x3e, 0x7f}, 16, 0x41, 0x00, 0x41, 0x00, 0x41, 0x00, 0xfc, 0x0b, 0x00),
			"33 blocks and branches (the deadline's own included) carrying 8000 values"},
		{"ifs within", code(noLocals, 8_000, ifThen...), ""},
		{"br_table labels", code(noLocals, 1, append(append([]byte{0x02, 0x40, 0x41, 0x00, 0x0e}, vec(20_000, 0x00)...), 0x00, 0x0b)...),
			"20003 blocks and branches"},
		{"locals", code([]byte{0x01, 0x80, 0x80, 0x08, 0x7f}, 0), "131072 locals, parameters and results, over the limit of 65536"},
		{"locals read after blocks", code([]byte{0x01, 0xc0, 0x3e, 0x7f}, 1000, ifThen...), "1001 blocks and branches (the deadline's own included) carrying 8000 values"},
		{"size", code(noLocals, 1<<20, 0x01), "1048578 bytes of code, over the limit of 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := manifest.Read(moduleWith(t, map[byte][]byte{10: tt.code}))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, manifest.ErrCompileCost) || !errors.Is(err, manifest.ErrInvalid) || errors.Is(err, manifest.ErrMalformed) ||
				!strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `function 0 (export "berm_tool_t")`) {
				t.Fatalf("err = %.300v, want ErrCompileCost naming function 0 and saying %q", err, tt.want)
			}
		})
	}
	// 17 functions just under the bound (8,000 ifs each) and 9 MB of nop:
	// within what 9 MB of code may weigh, but past any module's.
	t.Run("module", func(t *testing.T) {
		t.Parallel()
		var heavy, light []byte
		for range 8_000 {
			heavy = append(heavy, ifThen...)
		}
		heavy = append(append([]byte{0x00}, heavy...), 0x0b)
		light = append(append([]byte{0x00}, bytes.Repeat([]byte{0x01}, 1<<20-16)...), 0x0b)
		var section []byte
		n := 0
		for _, body := range [][]byte{heavy, light} {
			count := 17
			if len(body) == len(light) {
				count = 9
			}
			for range count {
				section = append(appendULEB(section, uint64(len(body))), body...)
				n++
			}
		}
		section = append(appendULEB(nil, uint64(n)), section...)
		_, err := manifest.Read(moduleWith(t, map[byte][]byte{3: vec(n, 0x00), 10: section}))
		if !errors.Is(err, manifest.ErrCompileCost) || !strings.Contains(err.Error(), "at most 1073741824") ||
			!strings.Contains(err.Error(), "over the limit of 1073741824 for its") {
			t.Fatalf("err = %.400v, want ErrCompileCost at MaxModuleWeight", err)
		}
	})
	t.Run("unknown instruction", func(t *testing.T) {
		t.Parallel()
		_, err := manifest.Read(moduleWith(t, map[byte][]byte{10: code(noLocals, 1, 0x06)}))
		if !errors.Is(err, manifest.ErrMalformed) || !strings.Contains(err.Error(), "code section") {
			t.Fatalf("err = %v, want a malformed code section", err)
		}
	})
	t.Run("export names", func(t *testing.T) {
		t.Parallel()
		var exports []byte
		n := 2000
		exports = appendULEB(exports, uint64(n))
		for i := range n {
			exports = appendULEB(exports, 600)
			exports = append(exports, fmt.Sprintf("%0600d", i)...)
			exports = append(exports, 0x00, 0x00)
		}
		_, err := manifest.Read(moduleWith(t, map[byte][]byte{7: exports}))
		if !errors.Is(err, manifest.ErrTooMany) || !strings.Contains(err.Error(), "names of the exports: over the limit of 1048576 bytes") {
			t.Fatalf("err = %.300v, want ErrTooMany for the exports' names", err)
		}
	})
	for _, image := range []string{"../examples/hello/hello.wasm", "../examples/notes/notes.wasm", "../examples/wc/wc.wasm"} {
		if _, err := manifest.Read(readFixture(t, image)); err != nil {
			t.Errorf("%s: %v", image, err)
		}
	}
}

// BenchmarkReadHello reads the manifest of a 3.4 MB Go-built image, its
// code's shape included: what every deploy and every serve start pays per
// program, before any compile.
func BenchmarkReadHello(b *testing.B) {
	image := readFixture(b, "../examples/hello/hello.wasm")
	b.SetBytes(int64(len(image)))
	for b.Loop() {
		if _, err := manifest.Read(image); err != nil {
			b.Fatal(err)
		}
	}
}
