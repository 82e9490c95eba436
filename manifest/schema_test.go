package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaFixture is one file of testdata/schemas: a tool's parameters and
// arguments that, for costly_*, must be refused as too costly to check and,
// for ordinary_*, must be accepted.
type schemaFixture struct {
	Shows      string          `json:"shows"`
	Parameters json.RawMessage `json:"parameters"`
	Arguments  json.RawMessage `json:"arguments"`
}

func schemaFixtures(t *testing.T, pattern string) map[string]schemaFixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "schemas", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures %s: %v", pattern, err)
	}
	fixtures := map[string]schemaFixture{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f schemaFixture
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		fixtures[strings.TrimSuffix(filepath.Base(file), ".json")] = f
	}
	return fixtures
}

// fixtureTools are the tools of the fixtures, decoded once for every test.
var fixtureTools sync.Map // name -> func() (*Tool, error)

// fixtureTool is the tool of fixture name, with its fixture.
func fixtureTool(t *testing.T, name string, f schemaFixture) *Tool {
	t.Helper()
	decode, _ := fixtureTools.LoadOrStore(name, sync.OnceValues(func() (*Tool, error) {
		m, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":` + string(f.Parameters) + `}]}`))
		if err != nil {
			return nil, err
		}
		return m.Tool("t"), nil
	}))
	tool, err := decode.(func() (*Tool, error))()
	if err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	return tool
}

// toolOf decodes a manifest of one tool "t" with these parameters.
func toolOf(t testing.TB, parameters string) *Tool {
	t.Helper()
	m, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":` + parameters + `}]}`))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return m.Tool("t")
}

// TestCheckCostly: every schema of testdata/schemas/costly_* takes seconds
// to hours of CPU on a small argument without a bound (2^22 subschemas and
// more); each check is refused as too costly, the schema's fault, after
// the steps it may take.
func TestCheckCostly(t *testing.T) {
	t.Parallel()
	for name, f := range schemaFixtures(t, "costly_*.json") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tool := fixtureTool(t, name, f)
			err := tool.Validate(f.Arguments)
			if !errors.Is(err, ErrArguments) || !errors.Is(err, ErrCostly) {
				t.Fatalf("%s: Validate(%s) = %v, want ErrArguments and ErrCostly", f.Shows, f.Arguments, err)
			}
		})
	}
}

// TestCheckOrdinary: ordinary schemas, recursive ones included, check their
// arguments within a few steps a byte, also when the arguments are deep or
// wide, and still name the field of a violation.
func TestCheckOrdinary(t *testing.T) {
	t.Parallel()
	deepTree := strings.Repeat(`{"name":"n","children":[`, 300) + `{"name":"leaf"}` + strings.Repeat(`]}`, 300)
	wideTree := `{"name":"r","children":[` + strings.Repeat(`{"name":"c","children":[{"name":"g"}]},`, 2000) + `{"name":"z"}]}`
	deepBinary := strings.Repeat(`{"value":1,"left":{"value":2},"right":`, 400) + `{"value":3}` + strings.Repeat(`}`, 400)
	deepValue := `{"value":` + strings.Repeat(`[{"a":`, 200) + `"x"` + strings.Repeat(`}]`, 200) + `}`
	var exprs strings.Builder
	exprs.WriteString(`{"expr":`)
	for range 100 {
		exprs.WriteString(`{"kind":"add","args":[{"kind":"num","value":1},`)
	}
	exprs.WriteString(`{"kind":"var","value":"x"}`)
	exprs.WriteString(strings.Repeat(`]}`, 100) + `}`)
	wideObject := `{"id":1,"tags":[` + strings.Repeat(`"t",`, 0) + `"a","b"],"extra":"` + strings.Repeat("x", 1000) + `"}`
	more := map[string][]string{
		"ordinary_tree":        {deepTree, wideTree},
		"ordinary_binary":      {deepBinary},
		"ordinary_json_value":  {deepValue},
		"ordinary_union":       {exprs.String()},
		"ordinary_unevaluated": {wideObject},
	}
	for name, f := range schemaFixtures(t, "ordinary_*.json") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tool := fixtureTool(t, name, f)
			for _, args := range append([]string{string(f.Arguments)}, more[name]...) {
				steps, err := stepsOf(tool, []byte(args))
				if err != nil {
					t.Fatalf("%s: Validate(%.80s...) = %v, want nil", f.Shows, args, err)
				}
				// A few steps a byte: a quarter of what a check may take.
				if perByte := float64(steps) / float64(len(args)); perByte > CheckStepsPerByte/4 && steps > CheckSteps/4 {
					t.Errorf("%s: %d steps for %d bytes (%.1f a byte)", f.Shows, steps, len(args), perByte)
				}
				t.Logf("%d bytes, %d steps", len(args), steps)
			}
		})
	}
	t.Run("violation", func(t *testing.T) {
		t.Parallel()
		tool := fixtureTool(t, "ordinary_tree", schemaFixtures(t, "ordinary_tree.json")["ordinary_tree"])
		bad := strings.Repeat(`{"name":"n","children":[`, 50) + `{"name":7}` + strings.Repeat(`]}`, 50)
		err := tool.Validate([]byte(bad))
		field := strings.Repeat("/children/0", 50) + "/name"
		if !errors.Is(err, ErrArguments) || errors.Is(err, ErrCostly) || !strings.Contains(err.Error(), field) {
			t.Fatalf("Validate = %v, want ErrArguments naming %s", err, field)
		}
	})
}

// stepsOf checks args as Validate does and returns the steps it took.
func stepsOf(t *Tool, args []byte) (int64, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(args)))
	if err != nil {
		return 0, err
	}
	ch, err := t.take(context.Background())
	if err != nil {
		return 0, err
	}
	defer t.put(ch)
	sh := scan(args)
	limit := checkLimit(len(args), sh.depth) / max(sh.weight, 1)
	err = ch.check(context.Background(), doc, limit)
	return limit - ch.left, err
}

// dagTool is a tool whose $defs d0 .. dk each refer to the next twice,
// through allOf entries that are each a $ref: {} meets 2^(k+2)-2 steps.
func dagTool(t testing.TB, k int) *Tool {
	t.Helper()
	defs := map[string]any{fmt.Sprintf("d%d", k): map[string]any{"minProperties": 0}}
	for i := range k {
		next := map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", i+1)}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"allOf": []any{next, next}}
	}
	b, err := json.Marshal(map[string]any{"type": "object", "$ref": "#/$defs/d0", "$defs": defs})
	if err != nil {
		t.Fatal(err)
	}
	return toolOf(t, string(b))
}

// TestCheckSteps: a step is one subschema applied to one value. Each of the
// $defs d0 .. dk refers to the next twice, through allOf entries that are
// each a $ref, so {} meets 2^(k+2)-2 steps in all: the check takes exactly
// those that fit.
func TestCheckSteps(t *testing.T) {
	t.Parallel()
	limit := checkLimit(len("{}"), 1)
	k := 0
	for int64(1)<<(k+3)-2 <= limit {
		k++
	}
	if steps, err := stepsOf(dagTool(t, k), []byte("{}")); err != nil || steps != 1<<(k+2)-2 {
		t.Errorf("%d levels: %d steps, %v; want %d steps, nil", k, steps, err, 1<<(k+2)-2)
	}
	if err := dagTool(t, k+1).Validate([]byte("{}")); !errors.Is(err, ErrCostly) {
		t.Errorf("%d levels: %v, want ErrCostly", k+1, err)
	}
}

// TestCheckDeep: each violation costs memory in proportion to its depth, so
// deep arguments take fewer steps. 2,000 levels of arrays, each failing
// eight subschemas, held 330 MiB for their violations, and 5,000 levels
// about 2 GiB; they are refused long before.
func TestCheckDeep(t *testing.T) {
	t.Parallel()
	leaves := strings.Repeat(`{"type":"string"},`, 8)
	tool := toolOf(t, `{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"$defs":{"n":{"allOf":[`+leaves+`{"items":{"$ref":"#/$defs/n"}}]}}}`)
	args := `{"pad":"` + strings.Repeat("x", 1<<19) + `","a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`
	if err := tool.Validate([]byte(args)); !errors.Is(err, ErrCostly) {
		t.Fatalf("Validate = %.200v, want ErrCostly", err)
	}
}

// TestCheckOwnWork: a step is about a microsecond's work, and a keyword's
// own work is charged too, before it is done: without that, one pattern
// of 10 KB against a string of 512 KB took 36 s in one match (and passed),
// and a uniqueItems that a DAG of $defs applies 16 times to an array of
// 262,144 numbers hashed them 16 times, each past the deadline.
func TestCheckOwnWork(t *testing.T) {
	t.Parallel()
	var dag []string
	for i := range 4 {
		dag = append(dag, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	enum := strings.Repeat(`1,`, 9999) + `2`
	for _, tt := range []struct {
		name, parameters, args string
	}{
		{"pattern", `{"type":"object","properties":{"s":{"type":"string","pattern":"` + strings.Repeat("(a|b)", 2000) + `$"}}}`,
			`{"s":"` + strings.Repeat("ab", 1<<18) + `"}`},
		{"uniqueItems", `{"type":"object","properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(dag, ",") + `,"d4":{"uniqueItems":true}}}`,
			`{"a":[[` + strings.Repeat(`0,`, 1<<18) + `1],` + strings.Repeat("0,", 20) + `2]}`},
		{"enum", `{"type":"object","properties":{"a":{"items":{"enum":[` + enum + `]}}}}`,
			`{"a":[` + strings.Repeat(`3,`, 399) + `3]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := toolOf(t, tt.parameters).Validate([]byte(tt.args)); !errors.Is(err, ErrCostly) {
				t.Fatalf("Validate = %.200v, want ErrCostly", err)
			}
		})
	}
}

// expiring is a context whose Err reports its deadline from the after+1th
// time it is asked: a check that runs past its deadline, as a count.
type expiring struct {
	context.Context
	after int32
	asked atomic.Int32
}

func (c *expiring) Err() error {
	if c.asked.Add(1) > c.after {
		return context.DeadlineExceeded
	}
	return nil
}

// TestCheckContext: a check looks at its context at each schema object it
// meets, and stops when it is done; the error is the context's, not a
// refusal of the arguments. The argument is padded so that its steps would
// last seconds.
func TestCheckContext(t *testing.T) {
	t.Parallel()
	f := schemaFixtures(t, "costly_allof.json")["costly_allof"]
	tool := fixtureTool(t, "costly_allof", f)
	args := []byte(`{"pad":"` + strings.Repeat("x", 1<<20) + `","a":` + strings.Repeat("[", 15) + strings.Repeat("]", 15) + `}`)
	ctx := &expiring{Context: context.Background(), after: 2}
	err := tool.ValidateContext(ctx, args)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrArguments) {
		t.Fatalf("ValidateContext = %v, want context.DeadlineExceeded and not ErrArguments", err)
	}
	if n := ctx.asked.Load(); n != ctx.after+1 {
		t.Errorf("the context was asked %d times, want %d", n, ctx.after+1)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tool.ValidateContext(canceled, args); !errors.Is(err, context.Canceled) {
		t.Errorf("ValidateContext(canceled) = %v, want context.Canceled", err)
	}
	// The checker the stopped checks used serves the next one as new.
	if err := tool.Validate([]byte(`{"a":[[[]]]}`)); err != nil {
		t.Errorf("Validate after the stopped checks = %v", err)
	}
}

// TestCheckConcurrent: concurrent checks of one tool each have their steps:
// the costly ones are refused, the ordinary ones pass, whatever runs beside
// them. Run it with -race.
func TestCheckConcurrent(t *testing.T) {
	t.Parallel()
	f := schemaFixtures(t, "costly_allof.json")["costly_allof"]
	tool := toolOf(t, string(f.Parameters)) // its own, to count its checkers
	var wg sync.WaitGroup
	for i := range 2 * maxCheckers {
		wg.Go(func() {
			for range 2 {
				if i%2 == 0 {
					if err := tool.Validate(f.Arguments); !errors.Is(err, ErrCostly) {
						t.Errorf("costly: %v, want ErrCostly", err)
					}
				} else if err := tool.Validate([]byte(`{"a":[[[]],[]]}`)); err != nil {
					t.Errorf("ordinary: %v", err)
				}
			}
		})
	}
	wg.Wait()
	tool.mu.Lock()
	made := tool.made
	tool.mu.Unlock()
	if made > maxCheckers {
		t.Errorf("%d checkers made, want at most %d", made, maxCheckers)
	}
	// Each comes back, those compiled for checks that had one by then too.
	var all []*checker
	for range made {
		ch, err := tool.take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ch)
	}
	for _, ch := range all {
		tool.put(ch)
	}
}

// TestCheckWaitsUnderContext: past maxCheckers, a check waits for a checker
// under its context rather than compile one, which can take seconds for a
// large schema with nothing to stop it.
func TestCheckWaitsUnderContext(t *testing.T) {
	t.Parallel()
	tool := toolOf(t, `{"type":"object","properties":{"a":{"type":"integer"}}}`)
	var all []*checker
	for range maxCheckers {
		ch, err := tool.take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ch)
	}
	// No checker comes back, so this waits for its deadline whatever the
	// machine's speed.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tool.ValidateContext(ctx, []byte(`{"a":1}`)); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrArguments) {
		t.Errorf("ValidateContext with every checker busy = %v, want context.DeadlineExceeded", err)
	}
	for _, ch := range all {
		tool.put(ch)
	}
	if err := tool.Validate([]byte(`{"a":1}`)); err != nil {
		t.Errorf("Validate with the checkers back = %v", err)
	}
}

// TestCheckEveryObject: in the compiled checker of every fixture, each schema
// object has a step format, so that none applies subschemas uncounted: the
// others are true, false or {}, or (before draft 2019-09) only a $ref, which
// their parent pays for.
func TestCheckEveryObject(t *testing.T) {
	t.Parallel()
	for name, f := range schemaFixtures(t, "*.json") {
		tool := fixtureTool(t, name, f)
		ch, err := tool.take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for s := range reachable(ch.schema) {
			switch {
			case s.Bool != nil:
			case s.DraftVersion < 2019 && s.Ref != nil:
				n++
			case s.Format == nil || !strings.HasPrefix(s.Format.Name, "berm-step-"):
				t.Errorf("%s: %s has no step format", name, s.Location)
			default:
				n++
			}
		}
		// And every object count found is one the validator reaches.
		if n != len(tool.steps) {
			t.Errorf("%s: reached %d schema objects, count found %d", name, n, len(tool.steps))
		}
		tool.put(ch)
	}
}

// reachable is every schema the validator can reach from s through the
// exported fields.
func reachable(s *jsonschema.Schema) map[*jsonschema.Schema]bool {
	seen := map[*jsonschema.Schema]bool{}
	var visit func(v reflect.Value)
	visit = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			if sch, ok := v.Interface().(*jsonschema.Schema); ok {
				if seen[sch] {
					return
				}
				seen[sch] = true
			}
			visit(v.Elem())
		case reflect.Interface:
			if !v.IsNil() {
				visit(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					visit(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				visit(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				visit(it.Key())
				visit(it.Value())
			}
		}
	}
	visit(reflect.ValueOf(s))
	return seen
}

// TestStepOfKnowsEveryField: stepOf charges for each field of a compiled
// schema that can hold a subschema; a new one (the validator's next version)
// fails here until stepOf charges for it too.
func TestStepOfKnowsEveryField(t *testing.T) {
	t.Parallel()
	charged := map[string]bool{
		"Ref": true, "RecursiveRef": true, "DynamicRef": true, "Not": true, "AllOf": true, "AnyOf": true,
		"OneOf": true, "If": true, "Then": true, "Else": true, "PropertyNames": true, "Properties": true,
		"PatternProperties": true, "AdditionalProperties": true, "Dependencies": true, "DependentSchemas": true,
		"UnevaluatedProperties": true, "Contains": true, "Items": true, "AdditionalItems": true,
		"PrefixItems": true, "Items2020": true, "UnevaluatedItems": true,
		// Never compiled: berm does not assert content (ContentSchema), nor
		// register a vocabulary of keywords (Extensions); Format is the step.
		"ContentSchema": false, "Extensions": false, "Format": false,
		// Values, not subschemas.
		"Enum": false, "Const": false, "Pattern": false, "Default": false, "Examples": false,
	}
	schema := reflect.TypeFor[jsonschema.Schema]()
	for i := range schema.NumField() {
		f := schema.Field(i)
		if !f.IsExported() || !mayHoldSchema(f.Type, map[reflect.Type]bool{}) {
			continue
		}
		if _, ok := charged[f.Name]; !ok {
			t.Errorf("jsonschema.Schema.%s (%s) may hold a subschema that stepOf does not charge for", f.Name, f.Type)
		}
	}
}

func mayHoldSchema(typ reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	switch typ.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice:
		return typ.Elem() == reflect.TypeFor[jsonschema.Schema]() || mayHoldSchema(typ.Elem(), seen)
	case reflect.Map:
		return mayHoldSchema(typ.Key(), seen) || mayHoldSchema(typ.Elem(), seen)
	case reflect.Struct:
		for i := range typ.NumField() {
			if typ.Field(i).IsExported() && mayHoldSchema(typ.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// TestCheckRefusedSchemas: a reference to a metaschema, which the validator
// holds without fetching, is a reference outside the schema (ABI.md), and
// unbounded: refused at deploy, as a reference to anywhere else is.
func TestCheckRefusedSchemas(t *testing.T) {
	t.Parallel()
	for _, parameters := range []string{
		`{"type":"object","properties":{"s":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}}`,
		`{"type":"object","properties":{"s":{"$ref":"http://json-schema.org/draft-07/schema#"}}}`,
		`{"type":"object","properties":{"s":{"$ref":"https://json-schema.org/draft/2020-12/meta/applicator"}}}`,
	} {
		if _, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":` + parameters + `}]}`)); !errors.Is(err, ErrSchema) {
			t.Errorf("Decode(%s) = %v, want ErrSchema", parameters, err)
		}
		var outside *outsideError
		if err := new(Tool).compileSchema(json.RawMessage(parameters)); !errors.As(err, &outside) {
			t.Errorf("compileSchema(%s) = %v, want refers outside itself", parameters, err)
		}
	}
	// A dialect named by $schema is not a reference.
	for _, dialect := range []string{"https://json-schema.org/draft/2020-12/schema", "http://json-schema.org/draft-04/schema#"} {
		toolOf(t, `{"$schema":"`+dialect+`","type":"object","properties":{"a":{"type":"string"}}}`)
	}
}

// TestDescribeViolationBounded: a check can find a violation for each of its
// steps; the refusal names the first sixteen and counts the rest.
func TestDescribeViolationBounded(t *testing.T) {
	t.Parallel()
	tool := toolOf(t, `{"type":"object","properties":{"a":{"items":{"type":"string"}}}}`)
	args := `{"a":[` + strings.Repeat(`1,`, 9999) + `1]}`
	err := tool.Validate([]byte(args))
	if !errors.Is(err, ErrArguments) {
		t.Fatalf("Validate = %v, want ErrArguments", err)
	}
	parts := strings.Split(err.Error(), "; ")
	if len(parts) != maxLeaves+1 || parts[len(parts)-1] != "and 9,984 more" || !strings.Contains(parts[0], "/a/0:") {
		t.Errorf("Validate = %.300s..., want %d violations from /a/0 and \"and 9,984 more\"", err, maxLeaves)
	}
	// The validator quotes the whole enum a value is not in.
	tool = toolOf(t, `{"type":"object","properties":{"a":{"enum":[`+strings.Repeat(`"long value",`, 999)+`"last"]}}}`)
	if err := tool.Validate([]byte(`{"a":"x"}`)); !errors.Is(err, ErrArguments) || len(err.Error()) > 2*maxViolation {
		t.Errorf("Validate = %d bytes (%.300s...), want ErrArguments in at most %d", len(err.Error()), err, 2*maxViolation)
	}
}

func TestNesting(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		json  string
		depth int
	}{
		{`{}`, 1},
		{`{"a":[1,{"b":[]}]}`, 4},
		{`{"a":"[[[{{{"}`, 1},
		{`{"a":"\"[[["}`, 1},
		{`{"a":"\\","b":[[]]}`, 3},
		{`"x"`, 0},
	} {
		if got := scan([]byte(tt.json)).depth; got != tt.depth {
			t.Errorf("scan(%s).depth = %d, want %d", tt.json, got, tt.depth)
		}
	}
}

// FuzzCheck shows that no schema and arguments make a check panic, and that
// every refusal of arguments is ErrArguments. Seeds: testdata/schemas.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "schemas", "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var fx schemaFixture
		if err := json.Unmarshal(b, &fx); err != nil {
			f.Fatal(err)
		}
		f.Add(string(fx.Parameters), string(fx.Arguments))
	}
	f.Fuzz(func(t *testing.T, parameters, args string) {
		m, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":` + parameters + `}]}`))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("refusal %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := m.Tools[0].Validate([]byte(args)); err != nil && !errors.Is(err, ErrArguments) {
			t.Fatalf("Validate(%q) = %v, want nil or ErrArguments", args, err)
		}
	})
}

// BenchmarkDecodeExamples is Decode of each example program's manifest, as
// every deploy, inspect and start of berm serve makes it: the schemas'
// compiles are most of it.
func BenchmarkDecodeExamples(b *testing.B) {
	images, err := filepath.Glob(filepath.Join("..", "examples", "*", "*.wasm"))
	if err != nil || len(images) == 0 {
		b.Fatalf("no example images: %v", err)
	}
	for _, image := range images {
		bytes, err := os.ReadFile(image)
		if err != nil {
			b.Fatal(err)
		}
		m, err := Read(bytes)
		if err != nil {
			b.Fatalf("%s: %v", image, err)
		}
		b.Run(filepath.Base(filepath.Dir(image)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(m.Raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCheckNumbers: the validator makes a big.Rat of a number's text each
// time a keyword needs its value, in time that grows with its digits and
// its exponent, where no step sees it: 1e999999 took 20 ms, a number of a
// million digits 1.4 s, and uniqueItems over 300 numbers like the first
// 6.8 s past a deadline of 200 ms. A number past the bounds is refused
// before the check, naming its field; every int64, uint64 and float64
// passes.
func TestCheckNumbers(t *testing.T) {
	t.Parallel()
	digits := func(n int) string { return strings.Repeat("7", n) }
	schemas := map[string]string{
		"uniqueItems": `{"type":"array","items":{"type":"string"},"uniqueItems":true}`,
		"integer":     `{"type":"integer"}`,
		"enum":        `{"enum":[1,2,3,4,5,6,7,8,9,10]}`,
		"const":       `{"const":1}`,
		"minimum":     `{"minimum":0}`,
		"multipleOf":  `{"multipleOf":0.5}`,
		"number":      `{"type":"number"}`,
	}
	for name, schema := range schemas {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tool := toolOf(t, `{"type":"object","properties":{"n":`+schema+`}}`)
			for _, n := range []string{"1e999999", "-1E+401", "1e-401", "1e0000000000401", digits(101),
				"-0." + digits(100), digits(50) + "." + digits(51) + "e1", digits(2000)} {
				args := `{"n":[1,` + n + `]}`
				if name != "uniqueItems" {
					args = `{"n":` + n + `}`
				}
				err := tool.Validate([]byte(args))
				if !errors.Is(err, ErrArguments) || !errors.Is(err, ErrNumber) || errors.Is(err, ErrCostly) {
					t.Errorf("Validate(%.60s) = %v, want ErrArguments and ErrNumber", args, err)
				} else if field := map[bool]string{true: "at /n/1:", false: "at /n:"}[name == "uniqueItems"]; !strings.Contains(err.Error(), field) {
					t.Errorf("Validate(%.60s) = %v, want it to name the field (%s)", args, err, field)
				}
			}
		})
	}
	// Within the bounds, in every form an encoder writes.
	tool := toolOf(t, `{"type":"object","properties":{"i":{"items":{"type":"integer"}},"n":{"items":{"type":"number"}}}}`)
	args := `{"i":[-9223372036854775808,18446744073709551615,1e400,1E+400,` + digits(100) + `,0,-0,1e0000000000400],` +
		`"n":[1.7976931348623157e308,4.9e-324,-2.2250738585072014E-308,0.1,1e-400,-0.` + digits(99) + `,` +
		digits(50) + "." + digits(50) + `e-400,3.141592653589793]}`
	if err := tool.Validate([]byte(args)); err != nil {
		t.Errorf("Validate(%s) = %v, want nil", args, err)
	}
}

// TestCheckNumberWeight: a check of arguments whose numbers are long takes
// fewer steps, as a step may compare two of them: at the bounds one takes
// 3 µs, an int 0.25. Each of the $defs d0 .. dk refers to the next twice,
// and k is as many as fit the steps of {"n":10000}; {"n":1e400}, of the
// same length, is refused.
func TestCheckNumberWeight(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		json   string
		weight int64
	}{
		{`{"a":1,"b":[-9223372036854775808,0.5]}`, 1},
		{`{"a":1.7976931348623157e308}`, 3},
		{`{"a":"1e999999","b":"` + strings.Repeat("7", 200) + `"}`, 1},
		{`{"a":[` + strings.Repeat("7", 100) + `e-400]}`, 7},
		{`{"a":[` + strings.Repeat("7", 100) + `]}`, 4},
		{`{"a":1e401}`, 0},
		{`{"a":` + strings.Repeat("7", 101) + `}`, 0},
	} {
		if got := scan([]byte(tt.json)).weight; got != tt.weight {
			t.Errorf("scan(%.60s).weight = %d, want %d", tt.json, got, tt.weight)
		}
	}
	// A schema's long bounds are charged where they are compared.
	light, heavy := []byte(`{"n":10000}`), []byte(`{"n":1e400}`)
	bounded := func(multipleOf string) int64 {
		steps, _ := stepsOf(toolOf(t, `{"type":"object","properties":{"n":{"multipleOf":`+multipleOf+`}}}`), light)
		return steps
	}
	// Weights 4 and 1: a division by each, and a comparison past a step.
	if more := bounded("1e-400") - bounded("0.5"); more != (4+3)-(1+0) {
		t.Errorf("multipleOf 1e-400 takes %d steps more than 0.5, want 6", more)
	}
	k := 1
	for {
		if _, err := stepsOf(dagTool(t, k+1), light); err != nil {
			break
		}
		k++
	}
	if err := dagTool(t, k).Validate(light); err != nil {
		t.Fatalf("%d levels: Validate(%s) = %v, want nil", k, light, err)
	}
	if err := dagTool(t, k).Validate(heavy); !errors.Is(err, ErrCostly) {
		t.Errorf("%d levels: Validate(%s) = %v, want ErrCostly", k, heavy, err)
	}
}

// TestSchemaNumbers: a tool's parameters may hold no number past the bounds
// either: each keyword that compares with one parses it at every check.
func TestSchemaNumbers(t *testing.T) {
	t.Parallel()
	for _, parameters := range []string{
		`{"type":"object","properties":{"n":{"maximum":1e999}}}`,
		`{"type":"object","properties":{"n":{"enum":[1,` + strings.Repeat("7", 101) + `]}}}`,
		`{"type":"object","properties":{"n":{"const":{"a":[1e-999]}}}}`,
	} {
		_, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":` + parameters + `}]}`))
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "at /properties/n/") {
			t.Errorf("Decode(%.80s) = %v, want ErrSchema naming /properties/n/...", parameters, err)
		}
	}
	toolOf(t, `{"type":"object","properties":{"n":{"minimum":-1.7976931348623157e308,"maximum":1e400,"multipleOf":1e-400}}}`)
}

// TestCheckPatternSteps: a pattern's match is charged by its program's size
// times the text's length: "a{1000}b", 8 bytes, compiles to 1,003
// instructions, and took 8.2 s on 1 MiB of "a" at a deadline of 200 ms when
// it was charged by its length, as 32,000 steps.
func TestCheckPatternSteps(t *testing.T) {
	t.Parallel()
	tool := toolOf(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"a{1000}b"},"t":{"type":"string","pattern":"^[a-z]+$"},
		"e":{"type":"string","pattern":"(?:a?){1000}(?:b?){1000}(?:c?){1000}(?:d?){1000}"}}}`)
	kib := strings.Repeat("a", 1024)
	long, err := stepsOf(tool, []byte(`{"s":"`+kib+`"}`))
	if !errors.As(err, new(*jsonschema.ValidationError)) || long < 1003*1024/instBytesPerStep {
		t.Errorf("a{1000}b on 1 KiB: %d steps, %v; want at least %d and a violation", long, err, 1003*1024/instBytesPerStep)
	}
	short, err := stepsOf(tool, []byte(`{"t":"`+kib+`"}`))
	if err != nil || short > long/100 {
		t.Errorf("^[a-z]+$ on 1 KiB: %d steps, %v; want at most %d and nil", short, err, long/100)
	}
	// A program of optional parts walks all 8,002 instructions on "", in
	// 100 µs.
	if empty, err := stepsOf(tool, []byte(`{"e":""}`)); err != nil || empty < 8002/instBytesPerStep {
		t.Errorf(`(?:a?){1000}... on "": %d steps, %v; want at least %d and nil`, empty, err, 8002/instBytesPerStep)
	}
	args := `{"s":"` + strings.Repeat(kib, 128) + `"}`
	if err := tool.Validate([]byte(args)); !errors.Is(err, ErrCostly) {
		t.Errorf("a{1000}b on 128 KiB: %.200v, want ErrCostly", err)
	}
}

// realPatterns are patterns of real schemas, which berm takes: an IPv6
// address, the HTML standard's e-mail address, SemVer 2.0's, a UUID, a
// length bounded in the pattern.
var realPatterns = []string{
	`^(([0-9a-fA-F]{1,4}:){7,7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:)|fe80:(:[0-9a-fA-F]{0,4}){0,4}%[0-9a-zA-Z]{1,}|::(ffff(:0{1,4}){0,1}:){0,1}((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])|([0-9a-fA-F]{1,4}:){1,4}:((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9]))$`,
	"^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$",
	`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`,
	`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`,
	`^[a-z][a-z0-9_]{0,999}$`,
}

// TestSchemaPatterns: a pattern compiles to a program as large as its
// repetitions make it, once for each compile of the schema: 2,002
// patternProperties of "(a|aa|aaa|aaaa){1000}N" (12,003 instructions each)
// in 64 KiB compiled to 2 GB, for each of a tool's checkers. A pattern
// past MaxPatternInsts, or past MaxPatternsInsts with the others, is
// refused before it is compiled, naming where it is; real ones are not.
func TestSchemaPatterns(t *testing.T) {
	t.Parallel()
	big := `(a|aa|aaa|aaaa){1000}N`
	var many []string
	for i := range MaxPatternsInsts/1003 + 1 {
		many = append(many, fmt.Sprintf(`"a{1000}%d":true`, i))
	}
	for _, tt := range []struct{ name, parameters, at string }{
		{"pattern", `{"type":"object","properties":{"s":{"pattern":"` + big + `"}}}`, "at /properties/s/pattern:"},
		{"patternProperties", `{"type":"object","patternProperties":{"` + big + `":true}}`, "at /patternProperties:"},
		{"unreferenced", `{"type":"object","$defs":{"x":{"pattern":"` + big + `"}}}`, big},
		{"literal", `{"type":"object","properties":{"s":{"pattern":"(abcdefghijk){1000}"}}}`, "at /properties/s/pattern:"},
		{"all", `{"type":"object","patternProperties":{` + strings.Join(many, ",") + `}}`, "in all"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":` + tt.parameters + `}]}`))
			if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), tt.at) {
				t.Errorf("Decode = %v, want ErrSchema naming %s", err, tt.at)
			}
		})
	}
	for _, p := range realPatterns {
		b, _ := json.Marshal(p)
		tool := toolOf(t, `{"type":"object","properties":{"s":{"type":"string","pattern":`+string(b)+`}}}`)
		if err := tool.Validate([]byte(`{"s":"1.0.0"}`)); err != nil && !errors.Is(err, ErrArguments) {
			t.Errorf("%.40s: %v", p, err)
		}
	}
	// A pattern Go refuses is refused as before, as not valid.
	if _, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":{"type":"object","properties":{"s":{"pattern":"a{1001}"}}}}]}`)); !errors.Is(err, ErrSchema) {
		t.Errorf("a{1001}: %v, want ErrSchema", err)
	}
}

// TestCheckersSharePatterns: every checker of a tool matches with the same
// compiled patterns, which a check never changes; each compiled its own.
func TestCheckersSharePatterns(t *testing.T) {
	t.Parallel()
	tool := toolOf(t, `{"type":"object","properties":{"s":{"pattern":"^a+$"}},"patternProperties":{"^x":{"pattern":"b"}}}`)
	first, err := tool.take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	second, err := tool.take(context.Background()) // compiled meanwhile
	if err != nil {
		t.Fatal(err)
	}
	patternsOf := func(ch *checker) map[string]jsonschema.Regexp {
		m := map[string]jsonschema.Regexp{}
		for s := range reachable(ch.schema) {
			if s.Pattern != nil {
				m[s.Pattern.String()] = s.Pattern
			}
			for re := range s.PatternProperties {
				m[re.String()] = re
			}
		}
		return m
	}
	a, b := patternsOf(first), patternsOf(second)
	if len(a) != 3 || len(b) != 3 {
		t.Fatalf("patterns %v and %v, want 3 each", a, b)
	}
	for text, re := range a {
		if b[text] != re {
			t.Errorf("%s: compiled once for each checker", text)
		}
	}
	tool.put(first)
	tool.put(second)
}

// TestSchemaSize: the validator's compile takes time in the square of the
// subschemas and the cube of their nesting: 20,000 {} in an allOf (60 KB)
// took 5.7 s to read, 6,000 levels of items more than 100 s. Both are
// bounded before anything is compiled.
func TestSchemaSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, parameters string }{
		{"objects", `{"type":"object","allOf":[` + strings.Repeat(`{},`, MaxSchemaObjects) + `{}]}`},
		{"booleans", `{"type":"object","allOf":[` + strings.Repeat(`true,`, MaxSchemaObjects) + `true]}`},
		{"items", `{"type":"object","properties":{"a":` + strings.Repeat(`{"items":`, MaxSchemaDepth) + `{}` + strings.Repeat(`}`, MaxSchemaDepth) + `}}`},
		{"properties", `{"type":"object"` + strings.Repeat(`,"properties":{"a":{"type":"object"`, MaxSchemaDepth/2) + strings.Repeat(`}}`, MaxSchemaDepth/2) + `}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode([]byte(`{"abi_version":0,"tools":[{"name":"t","parameters":` + tt.parameters + `}]}`))
			if !errors.Is(err, ErrSchema) {
				t.Errorf("Decode = %v, want ErrSchema", err)
			}
		})
	}
	// At the bounds.
	toolOf(t, `{"type":"object","properties":{"a":`+strings.Repeat(`{"items":`, MaxSchemaDepth-3)+`{}`+strings.Repeat(`}`, MaxSchemaDepth-3)+`}}`)
	toolOf(t, `{"type":"object","allOf":[`+strings.Repeat(`{},`, MaxSchemaObjects-2)+`{}]}`)
}

// TestCheckersBounded: a tool's checkers hold checkerValues of its
// schema's objects and booleans in all, each a compiled copy: a schema of
// 1,100 keeps 7 checkers, not 8.
func TestCheckersBounded(t *testing.T) {
	t.Parallel()
	tool := toolOf(t, `{"type":"object","allOf":[`+strings.Repeat(`{},`, 1098)+`{}]}`)
	want := checkerValues / 1100
	var all []*checker
	for range want {
		ch, err := tool.take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ch)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tool.take(canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("take with every checker busy = %v, want context.Canceled", err)
	}
	tool.mu.Lock()
	made := tool.made
	tool.mu.Unlock()
	if made != want {
		t.Errorf("%d checkers made, want %d", made, want)
	}
	for _, ch := range all {
		tool.put(ch)
	}
}

// TestCheckLongNumbersEnum: an enum of 100-digit numbers, against items of
// 100-digit numbers that each fail it before any step of theirs is charged,
// is charged by the digits on both sides: 10,000 such items under 90 enum
// values took 3 s of a 200 ms deadline, within the steps, each comparison
// 3 µs where a step was weighed at one.
func TestCheckLongNumbersEnum(t *testing.T) {
	t.Parallel()
	long := func(i int) string { return fmt.Sprintf("%d%s", 1+i%9, strings.Repeat("3", 99)) }
	var enum, items []string
	for i := range 90 {
		enum = append(enum, long(i))
	}
	for i := range 10_000 {
		items = append(items, "7"+long(i)[1:])
	}
	tool := toolOf(t, `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[`+strings.Join(enum, ",")+`]}}}}`)
	err := tool.ValidateContext(context.Background(), []byte(`{"a":[`+strings.Join(items, ",")+`]}`))
	if !errors.Is(err, ErrArguments) || !errors.Is(err, ErrCostly) {
		t.Fatalf("ValidateContext = %.300v, want ErrCostly", err)
	}
}

// TestCheckPatternClass: a class of many ranges is charged for its binary
// search: \pL{1000}! on 64,000 letters took 1.75 s, past a deadline of 1 s,
// charged as a{1000}! is (0.74 s), within the steps.
func TestCheckPatternClass(t *testing.T) {
	t.Parallel()
	tool := toolOf(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"\\pL{1000}!"}}}`)
	err := tool.ValidateContext(context.Background(), []byte(`{"s":"`+strings.Repeat("a", 64_000)+`"}`))
	if !errors.Is(err, ErrArguments) || !errors.Is(err, ErrCostly) {
		t.Fatalf("ValidateContext = %.300v, want ErrCostly", err)
	}
}
