package manifest_test

import (
	"encoding/json"
	"errors"
	"os"
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
