package manifest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var english = message.NewPrinter(language.English)

// ErrArguments is wrapped by every refusal of a call's arguments: not a JSON
// object, or not valid against the tool's parameters. It is the caller's
// error, not the program's, and its message names the field at fault.
var ErrArguments = errors.New("arguments refused")

// ErrCostly is wrapped, with ErrArguments, by the refusal of arguments whose
// check against the tool's parameters would take more than CheckSteps plus
// CheckStepsPerByte for each of their bytes. The arguments are refused, but
// the fault is the schema's, which multiplies its work with each level of
// nesting: its message says so.
var ErrCostly = errors.New("too costly to check")

// ErrNumber is wrapped, with ErrArguments, by the refusal of arguments that
// hold a number past MaxNumberDigits or MaxNumberExponent.
var ErrNumber = errors.New("number out of bounds")

// The bounds of a number, in a call's arguments or a tool's parameters. The
// validator makes a big.Rat of a number's text each time a keyword needs its
// value (type integer, minimum, multipleOf, enum, const, uniqueItems), in
// time that grows with its digits and more than linearly with its exponent:
// 1e999999 took 20 ms, a number of a million digits 1.4 s, both before any
// step could see them. At the bounds a number takes about 3 µs; every int64
// and uint64 is within them, and every float64 as any encoder writes it.
const (
	// MaxNumberDigits bounds the digits of a number, before and after its
	// point together.
	MaxNumberDigits = 100
	// MaxNumberExponent bounds the magnitude of its exponent, as written.
	MaxNumberExponent = 400
)

// The bounds of a tool's parameters beyond their size (MaxParameters), each
// checked before what it bounds is compiled. The validator's compile takes
// time in the square of the subschemas (8,000 took 0.7 s) and in the cube
// of their nesting (properties 400 levels deep took 1.7 s, 64 KiB of them
// minutes), and a regular expression compiles to a program whose size can
// be a thousand times its text's: 2,002 patterns of 24 bytes compiled to
// 2 GB. A pattern's program is compiled once for all of a tool's checks.
const (
	// MaxSchemaDepth bounds the nesting of the parameters' JSON.
	MaxSchemaDepth = 64
	// MaxSchemaObjects bounds the JSON objects and booleans in the
	// parameters: every subschema is one, and so is each properties.
	MaxSchemaObjects = 4096
	// MaxPatternInsts bounds the instructions of one pattern's program
	// (pattern, or a key of patternProperties): Go's regexp matches in
	// time up to their number times the text's length. A pattern of
	// berm's examples takes under 100, and the longest real ones (an IPv6
	// address, [a-z]{1,1000}) about 1,000 and 2,000.
	MaxPatternInsts = 10_000
	// MaxPatternsInsts bounds the instructions of all the patterns of a
	// tool's parameters, which take about 45 bytes each once compiled.
	MaxPatternsInsts = 100_000
)

// The work of checking one call's arguments against its tool's parameters is
// bounded, whatever the schema. A step is one subschema applied to one value
// of the arguments, or one member of an object visited, or about as much of
// a keyword's own work (a pattern's, an enum's, uniqueItems'), each counted
// before it is taken: a microsecond or so. A check may take CheckSteps, plus
// CheckStepsPerByte for each byte of the arguments, up to CheckStepsMax in
// all; arguments nested deeper than CheckDepth levels take as many as that
// divided by 1 + depth/CheckDepth, since the validator holds each violation
// it finds with its place, in memory in proportion to its depth. An ordinary
// schema takes a few steps a byte or less; one whose recursion passes
// through allOf with two branches takes twice as many at each level of
// nesting. At CheckStepsMax a check takes about a second, and holds about
// 250 MiB if each of its steps finds a violation.
const (
	CheckSteps        = 1 << 15
	CheckStepsPerByte = 16
	CheckStepsMax     = 1 << 20
	CheckDepth        = 32
)

// Tool is one tool of a program.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of the tool's arguments as the manifest
	// gives it; {"type":"object"} when the manifest gives none.
	Parameters json.RawMessage `json:"parameters"`

	// anyObject is set when Parameters accepts every JSON object, so that
	// validation need not build a document tree.
	anyObject bool
	// counted is Parameters with a format of berm's in every schema object,
	// the one that counts steps, and steps what each of those formats
	// charges: every checker is compiled from them.
	counted []byte
	steps   []step
	// patterns are the regular expressions of Parameters, each compiled
	// once for every compile of the schema.
	patterns *patterns
	// checkers bounds the checkers of the tool, maxCheckers or fewer for a
	// large schema. spare is an idle checker, which a check takes with one
	// atomic swap; idle are the other idle checkers, of the made, and
	// waiting counts the checks that wait for one.
	checkers int
	spare    atomic.Pointer[checker]
	idle     chan *checker
	waiting  atomic.Int32
	mu       sync.Mutex
	made     int
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

// newCompiler is a compiler of a tool's parameters, which takes its
// patterns from ps (Go's regexp, unbounded, when nil).
func newCompiler(ps *patterns) *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if ps != nil {
		c.UseRegexpEngine(ps.compile)
	}
	for _, f := range uncheckedFormats {
		c.RegisterFormat(&jsonschema.Format{Name: f, Validate: func(any) error { return nil }})
	}
	return c
}

func (t *Tool) compileSchema(raw json.RawMessage) error {
	if isAbsent(raw) {
		raw = defaultParameters
	}
	// raw is valid JSON, a field of the manifest's.
	sh := scan(raw)
	if sh.depth > MaxSchemaDepth {
		return errors.New(english.Sprintf("nested %d levels deep, over the limit of %d (the compile takes time "+
			"in the cube of the nesting): define the deep parts under $defs and refer to them with $ref",
			sh.depth, MaxSchemaDepth))
	}
	if sh.values > MaxSchemaObjects {
		return errors.New(english.Sprintf("%d JSON objects and booleans, over the limit of %d (every subschema "+
			"is one, and the compile takes time in the square of their number): share repeated parts under $defs, "+
			"through $ref", sh.values, MaxSchemaObjects))
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if sh.weight == 0 {
		// Such a number is refused in arguments too.
		return numberError(doc, ", as in a call's arguments")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("want a JSON Schema object, got %s", jsonKind(doc))
	}
	if typ, _ := obj["type"].(string); typ != "object" {
		return fmt.Errorf(`want "type": "object"`)
	}
	if !acceptsAnyObject(obj) {
		// count compiles doc: the compiler's refusals are its.
		if err := t.count(doc, sh.values); err != nil {
			return err
		}
		t.Parameters = raw
		return nil
	}
	c := newCompiler(nil)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return err
	}
	if _, err := c.Compile(schemaURL); err != nil {
		return schemaError(err)
	}
	t.Parameters, t.anyObject = raw, true
	return nil
}

// schemaError is the compiler's refusal of a schema, in one line.
func schemaError(err error) error {
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		return fmt.Errorf("refers outside itself to %s, which is never fetched", load.URL)
	}
	var outside *outsideError
	if errors.As(err, &outside) {
		return outside
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

// patterns compiles the regular expressions of a tool's parameters, each
// once for all the compiles of the schema and every checker (a
// *regexp.Regexp is safe for concurrent use), and bounds their programs: a
// pattern past MaxPatternInsts, or past MaxPatternsInsts with those before
// it, is not compiled, and check refuses the schema.
type patterns struct {
	mu       sync.Mutex
	compiled map[string]*pattern
	insts    int        // of the patterns compiled
	over     []*pattern // those not compiled
}

// pattern is one regular expression of a tool's parameters.
type pattern struct {
	re        *regexp.Regexp // nil when refused
	text      string
	insts     int  // of its program
	estimated bool // insts, when over MaxPatternInsts by the estimate
}

func (p *pattern) String() string { return p.text }

// MatchString is the validator's match. A refused pattern never reaches a
// check: its schema is refused.
func (p *pattern) MatchString(s string) bool { return p.re != nil && p.re.MatchString(s) }

// instBytesPerStep is the instructions times bytes of text Go's regexp
// matches in a step, at its slowest: a{1000}b on 1 MiB of a's took 9 ns
// for each, (?i)abc 17 ns, and (a?){1000}(b?){1000} 13 ns on "".
const instBytesPerStep = 64

// perKiB is what a match of p takes for each KiB of text.
func (p *pattern) perKiB() int64 { return int64(p.insts) * 1024 / instBytesPerStep }

// perMatch is what a match of p takes beside its text: a step or more.
func (p *pattern) perMatch() int64 { return (int64(p.insts) + instBytesPerStep - 1) / instBytesPerStep }

// compile is the validator's regexp engine: it compiles expr as Go's
// regexp.Compile does, unless its program is past the bounds.
func (ps *patterns) compile(expr string) (jsonschema.Regexp, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p, ok := ps.compiled[expr]; ok {
		return p, nil
	}
	parsed, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	p := &pattern{text: expr, insts: progSize(parsed, MaxPatternInsts), estimated: true}
	if p.insts <= MaxPatternInsts {
		p.estimated = false
		// The estimate is close; the program itself is what is bounded.
		prog, err := syntax.Compile(parsed.Simplify())
		if err != nil {
			return nil, err
		}
		p.insts = progWeight(prog)
	}
	if p.insts <= MaxPatternInsts && ps.insts+p.insts <= MaxPatternsInsts {
		if p.re, err = regexp.Compile(expr); err != nil {
			return nil, err
		}
		ps.insts += p.insts
	} else {
		ps.over = append(ps.over, p)
	}
	ps.compiled[expr] = p
	return p, nil
}

// progWeight is the instructions of prog, a class of many ranges weighing
// more than one: Go's regexp finds a rune among a class's ranges by binary
// search, and \pL{1000}! took 2.4 times as long as a{1000}! to match.
func progWeight(prog *syntax.Prog) int {
	n := 0
	for _, inst := range prog.Inst {
		n++
		if inst.Op == syntax.InstRune && len(inst.Rune) > 2 {
			n += bits.Len(uint(len(inst.Rune)/2)) / 4
		}
	}
	return n
}

// progSize estimates the instructions of re's program as Go's parser does
// (it bounds them itself at 3.3 million), stopping past most.
func progSize(re *syntax.Regexp, most int) int {
	size := 0
	switch re.Op {
	case syntax.OpLiteral:
		size = len(re.Rune)
	case syntax.OpCapture, syntax.OpStar:
		size = 2 + progSize(re.Sub[0], most)
	case syntax.OpPlus, syntax.OpQuest:
		size = 1 + progSize(re.Sub[0], most)
	case syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			if size += progSize(sub, most); size > most {
				break
			}
		}
		if re.Op == syntax.OpAlternate {
			size += len(re.Sub) - 1
		}
	case syntax.OpRepeat:
		sub := progSize(re.Sub[0], most)
		switch {
		case re.Max == -1 && re.Min == 0:
			size = 2 + sub
		case re.Max == -1:
			size = 1 + min(re.Min, most+1)*sub
		default:
			size = min(re.Max, most+1)*sub + re.Max - re.Min
		}
	}
	return min(max(size, 1), most+1)
}

// check refuses the schema if a pattern was past the bounds, naming the
// first of those by place among schemas, the compiled schema objects, and
// by text: the compiler meets them in the order of Go's maps.
func (ps *patterns) check(schemas []*jsonschema.Schema) error {
	ps.mu.Lock()
	over := slices.Clone(ps.over)
	ps.mu.Unlock()
	if len(over) == 0 {
		return nil
	}
	// The patterns of a $defs that nothing refers to are compiled too, but
	// are nowhere among schemas.
	where := map[*pattern]string{}
	place := func(p *pattern, at string) {
		if w, ok := where[p]; !ok || at < w {
			where[p] = at
		}
	}
	for _, s := range schemas {
		at := strings.TrimPrefix(s.Location, schemaURL+"#")
		if p, ok := s.Pattern.(*pattern); ok && p.re == nil {
			place(p, "at "+at+"/pattern: ")
		}
		for re := range s.PatternProperties {
			if p, ok := re.(*pattern); ok && p.re == nil {
				place(p, "at "+at+"/patternProperties: ")
			}
		}
	}
	// Those too large on their own first, then those placed.
	rank := func(p *pattern) int {
		r := 0
		if p.insts <= MaxPatternInsts {
			r += 2
		}
		if where[p] == "" {
			r++
		}
		return r
	}
	slices.SortFunc(over, func(a, b *pattern) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(where[a], where[b]), strings.Compare(a.text, b.text))
	})
	p := over[0]
	text := cut(p.text, 40)
	switch {
	case p.estimated:
		return errors.New(english.Sprintf("%sthe pattern %q compiles to more than %d instructions, the limit (a "+
			"match takes time in their number times the text's length): repeat less (a{1000} compiles "+
			"to a thousand), and bound the length with maxLength rather than in the pattern", where[p], text, MaxPatternInsts))
	case p.insts > MaxPatternInsts:
		return errors.New(english.Sprintf("%sthe pattern %q compiles to %d instructions, over the limit of %d (a "+
			"match takes time in their number times the text's length): repeat less (a{1000} compiles "+
			"to a thousand), and bound the length with maxLength rather than in the pattern", where[p], text, p.insts, MaxPatternInsts))
	}
	return errors.New(english.Sprintf("%sthe patterns compile to more than %d instructions in all, the limit of a "+
		"tool's parameters: use fewer patterns, or shorter ones", where[p], MaxPatternsInsts))
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

// Counting the steps of a check.
//
// The validator has no budget and no context, and its one hook that runs
// before a schema object applies any subschema is its format: after type,
// const and enum (which apply none), before $ref, the applicators and the
// keywords on members and items, in every dialect and also where a result
// only needs to be true or false (inside not, if, a oneOf past its match),
// where it skips a custom vocabulary's keywords. So berm gives every schema
// object a format of its own (format is an annotation in ABI.md, so nothing
// is lost), which charges, before they run, the subschemas that object may
// apply next and its own keywords' work, and looks at the call's context:
// the schema objects that fail at once on type, const or enum are paid for
// by their parent, and a check is bounded by the steps it is given. The hook
// sees only the value, so each check needs a compiled copy of the schema of
// its own, a checker; a tool keeps those it has made, up to maxCheckers.
//
// Bounding the arguments' depth alone would not bound the work (two $defs
// each referring to the next twice blow up on {}), and refusing at deploy
// the schemas that might blow up would refuse ordinary recursive ones (a
// tree of named children), or be unsound, while a schema that blows up only
// past depths no caller sends still serves every call it can.

// step is what the format of one schema object charges, in steps of about a
// microsecond's work: the subschemas it may apply to the value itself, to
// each member of an object, to each item of an array, and the work of its
// own keywords, which no format stands before: per KiB of member names
// (patternProperties' regexps), per string and per KiB of it (its length,
// its pattern), and for uniqueItems each value of the array, hashed or
// compared.
type step struct {
	inPlace, perMember, perItem      int64
	perKeyKiB, perString, perTextKiB int64
	unique                           bool
}

// stepFormat is the name of schema object i's format in counted.
func stepFormat(i int) string { return "berm-step-" + strconv.Itoa(i) }

// stepsVocabulary is where berm's vocabulary sits. It has no keywords: the
// compiler calls it on every schema object it compiles, which is how count
// finds them.
const stepsVocabulary = "http://berm.invalid/vocab/steps"

// outsideError refuses a schema object that is not in the tool's schema: a
// reference to a metaschema, which the validator has without fetching it.
type outsideError struct{ location string }

func (e *outsideError) Error() string {
	return fmt.Sprintf("refers outside itself to %s: a tool's parameters are one schema, on their own", e.location)
}

// count finds every schema object the compiler compiles from doc, gives
// each its step format and keeps the result in t.counted, and compiles the
// first checker. doc is the compiled schema's own document, of values JSON
// objects and booleans: count changes it.
func (t *Tool) count(doc any, values int) error {
	type found struct {
		obj map[string]any
		sch *jsonschema.Schema
	}
	var objects []found
	t.patterns = &patterns{compiled: map[string]*pattern{}}
	c := newCompiler(t.patterns)
	// The vocabulary is called in every dialect only with AssertVocabs,
	// which also makes the metaschema this compile checks doc against the
	// dialect's vocabularies alone, without the keywords 2020-12 keeps from
	// the drafts before (definitions, dependencies): the checker's compile,
	// with the dialect's own metaschema, checks those.
	c.AssertVocabs()
	c.RegisterVocabulary(&jsonschema.Vocabulary{
		URL: stepsVocabulary,
		Compile: func(ctx *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
			sch := ctx.Enqueue(nil) // the schema being compiled
			if !strings.HasPrefix(sch.Location, schemaURL+"#") {
				return nil, &outsideError{sch.Location}
			}
			objects = append(objects, found{obj, sch})
			return nil, nil
		},
	})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return err
	}
	if _, err := c.Compile(schemaURL); err != nil {
		return schemaError(err)
	}
	schemas := make([]*jsonschema.Schema, len(objects))
	for i, f := range objects {
		schemas[i] = f.sch
	}
	if err := t.patterns.check(schemas); err != nil {
		return err
	}
	// Where unevaluatedProperties or unevaluatedItems are, the validator
	// copies what is not yet evaluated of an object or array for every
	// subschema applied to it in place: a step for each member or item.
	tracks := false
	for _, f := range objects {
		tracks = tracks || f.sch.UnevaluatedProperties != nil || f.sch.UnevaluatedItems != nil
	}
	t.steps = make([]step, len(objects))
	cs := costs{}
	for i, f := range objects {
		st := cs.stepOf(f.sch)
		st.inPlace += boundsCost(f.obj)
		if tracks {
			st.perMember += st.inPlace
			st.perItem += st.inPlace
		}
		t.steps[i] = st
		f.obj["format"] = stepFormat(i)
	}
	counted, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	t.counted = counted
	ch, err := t.newChecker()
	if err != nil {
		return err
	}
	t.checkers = min(max(checkerValues/max(values, 1), 1), maxCheckers)
	t.idle = make(chan *checker, t.checkers)
	t.spare.Store(ch)
	t.made = 1
	return nil
}

// stepOf is what schema object s charges: every subschema it may apply,
// each where it applies, and a visit of each member of an object (which the
// validator makes whatever the keywords). A member or item meets at most one
// of properties or prefixItems, so those charge their costliest.
func (c costs) stepOf(s *jsonschema.Schema) step {
	cost, costOf := c.cost, c.costOf
	st := step{unique: s.UniqueItems}
	// required and its kin look each name up in the object.
	names := len(s.Required)
	for _, r := range s.DependentRequired {
		names += len(r)
	}
	for _, dep := range s.Dependencies {
		if r, ok := dep.([]string); ok {
			names += len(r)
		}
	}
	st.inPlace = int64(names / 16)
	// A regexp matches in time up to its program's size times the text's
	// length and one: a program of optional parts walks them all on "".
	if p, ok := s.Pattern.(*pattern); ok {
		st.perString, st.perTextKiB = p.perMatch(), p.perKiB()
	}
	if s.MinLength != nil || s.MaxLength != nil {
		st.perTextKiB++
	}
	var matches int64
	for re := range s.PatternProperties {
		if p, ok := re.(*pattern); ok {
			matches += p.perMatch()
			st.perKeyKiB += p.perKiB()
		}
	}
	for _, l := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf,
		{s.Not, s.If, s.Then, s.Else, s.Ref, s.RecursiveRef}} {
		for _, sub := range l {
			st.inPlace += cost(sub)
		}
	}
	if s.DynamicRef != nil {
		st.inPlace += cost(s.DynamicRef.Ref)
	}
	for _, sub := range s.DependentSchemas {
		st.inPlace += cost(sub)
	}
	for _, dep := range s.Dependencies {
		if sub, ok := dep.(*jsonschema.Schema); ok {
			st.inPlace += cost(sub)
		}
	}

	var most int64
	for _, sub := range s.Properties {
		most = max(most, cost(sub))
	}
	st.perMember = 1 + most
	st.perMember += matches
	for _, sub := range s.PatternProperties {
		st.perMember += cost(sub)
	}
	st.perMember += costOf(s.AdditionalProperties) + cost(s.PropertyNames) + cost(s.UnevaluatedProperties)

	most = 0
	for _, sub := range s.PrefixItems {
		most = max(most, cost(sub))
	}
	if items, ok := s.Items.([]*jsonschema.Schema); ok {
		for _, sub := range items {
			most = max(most, cost(sub))
		}
	}
	st.perItem = most + costOf(s.Items) + cost(s.Items2020) + costOf(s.AdditionalItems) +
		cost(s.Contains) + cost(s.UnevaluatedItems)
	return st
}

// boundsCost is what comparing a number with the numeric bounds of schema
// object obj takes beyond a step: the validator holds each as a big.Rat, and
// divides by multipleOf's (3 µs for a long number by 1e-400, 8 µs for
// some).
func boundsCost(obj map[string]any) int64 {
	var n int64
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} {
		if v, ok := obj[k].(json.Number); ok {
			n += numberWeight(string(v)) - 1
			if k == "multipleOf" {
				n += numberWeight(string(v))
			}
		}
	}
	return n
}

// costs are the costs of applying each schema, as far as count has needed
// them.
type costs map[*jsonschema.Schema]int64

// cost is what applying sub takes: one step, its const and enum, which it
// checks before its format, and the cost of its target if sub is a $ref and
// nothing else (before draft 2019-09, such an object has no other keyword,
// so no format to charge for itself). A chain of them that closes on itself
// ends the check where it closes (the validator refuses a cycle).
func (c costs) cost(sub *jsonschema.Schema) int64 {
	if sub == nil {
		return 0
	}
	if n, ok := c[sub]; ok {
		return n
	}
	var compare int64
	if sub.Const != nil {
		compare += compareCost(*sub.Const)
	}
	if sub.Enum != nil {
		for _, v := range sub.Enum.Values {
			compare += compareCost(v)
		}
	}
	n := 1 + compare/8
	if sub.DraftVersion < 2019 && sub.Ref != nil {
		c[sub] = n // while its target's is found: where a cycle closes
		n += c.cost(sub.Ref)
	}
	c[sub] = n
	return n
}

// compareCost weighs comparing a value with v, in eighths of a step: the
// validator compares two numbers as big.Rat parsed from their text, a step
// or more for a long number, and the rest a value at a time.
func compareCost(v any) int64 {
	switch v := v.(type) {
	case json.Number:
		return 8 * numberWeight(string(v))
	case []any:
		n := int64(1)
		for _, e := range v {
			n += compareCost(e)
		}
		return n
	case map[string]any:
		n := int64(1)
		for _, e := range v {
			n += compareCost(e)
		}
		return n
	}
	return 1
}

// costOf is cost for the keywords that hold a schema, a bool or a list.
func (c costs) costOf(v any) int64 {
	if sub, ok := v.(*jsonschema.Schema); ok {
		return c.cost(sub)
	}
	return 0
}

// maxCheckers bounds the checkers of a tool, which it keeps once made: past
// them, checks wait for one, under their context. A checker holds a
// compiled copy of each subschema, about 800 bytes each, so a tool's
// checkers hold at most checkerValues of the parameters' objects and
// booleans in all: fewer checkers for a schema of more than 1,024 (a check
// takes a checker for micro- to milliseconds).
const (
	maxCheckers   = 8
	checkerValues = 1 << 13
)

// checker is one compiled copy of a tool's counted schema, with the steps
// left to the check that holds it.
type checker struct {
	schema *jsonschema.Schema
	ctx    context.Context
	left   int64 // steps left to this check
	// sizes are the values in each array met by uniqueItems, by its first
	// item: the validator hashes or compares them all at each check of the
	// array, and a schema may check one array many times.
	sizes map[*any]int64
}

// stop ends a check from inside the validator, which has no way to: err is
// errSpent or the context's error. The validator has no state of its own
// that a panic would leave behind (no defers), and the schema is not changed
// by a check.
type stop struct{ err error }

var errSpent = errors.New("steps spent")

func (t *Tool) newChecker() (*checker, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.counted))
	if err != nil {
		return nil, err
	}
	ch := &checker{ctx: context.Background(), left: 1 << 62}
	c := newCompiler(t.patterns)
	c.AssertFormat()
	for i := range t.steps {
		st := &t.steps[i]
		c.RegisterFormat(&jsonschema.Format{Name: stepFormat(i), Validate: func(v any) error { return ch.charge(st, v) }})
	}
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	if ch.schema, err = c.Compile(schemaURL); err != nil {
		return nil, schemaError(err)
	}
	return ch, nil
}

// charge takes what the schema object of st is about to do with v, and
// looks at the check's context: a step may stand for much work (hashing a
// long array), and the context is one atomic load. Work that nothing can
// stop once begun (a pattern's match, uniqueItems' hashing) and that would
// outlast the context's deadline even at longStep's fastest ends the check
// at once, as the deadline: a match of 60 KiB within the steps took 0.7 s.
func (ch *checker) charge(st *step, v any) error {
	n := st.inPlace
	var whole int64 // of n, the work done in one piece
	switch v := v.(type) {
	case map[string]any:
		n += st.perMember * int64(len(v))
		if st.perKeyKiB > 0 {
			names := 0
			for k := range v {
				names += len(k)
			}
			n += st.perKeyKiB * int64(names) >> 10
		}
	case []any:
		n += st.perItem * int64(len(v))
		if st.unique && len(v) > 1 {
			values := ch.size(v)
			if len(v) <= 20 {
				values *= int64(len(v)) // compared in pairs
			}
			whole = values
		}
	case string:
		whole = st.perString + st.perTextKiB*int64(len(v))>>10
	}
	if ch.left -= n + whole; ch.left < 0 {
		panic(stop{errSpent})
	}
	if err := ch.ctx.Err(); err != nil {
		panic(stop{err})
	}
	if whole >= longStep {
		if d, ok := ch.ctx.Deadline(); ok && time.Until(d) < time.Duration(whole)*longStepTime {
			panic(stop{context.DeadlineExceeded})
		}
	}
	return nil
}

// A step of work done in one piece takes about longStepTime (a match of
// a{1000}! 0.74 µs, with each class weighed by progWeight about as long),
// and from longStep steps on such work is not begun when it would end
// past the deadline.
const (
	longStep     = 1 << 10
	longStepTime = time.Microsecond
)

// size counts the values in v, remembering arrays.
func (ch *checker) size(v any) int64 {
	switch v := v.(type) {
	case []any:
		if len(v) == 0 {
			return 1
		}
		if n, ok := ch.sizes[&v[0]]; ok {
			return n
		}
		n := int64(1)
		for _, e := range v {
			n += ch.size(e)
		}
		if ch.sizes == nil {
			ch.sizes = map[*any]int64{}
		}
		ch.sizes[&v[0]] = n
		return n
	case map[string]any:
		n := int64(1)
		for _, e := range v {
			n += ch.size(e)
		}
		return n
	}
	return 1
}

// check validates doc with at most limit steps, until ctx is done.
func (ch *checker) check(ctx context.Context, doc any, limit int64) (err error) {
	ch.ctx, ch.left = ctx, limit-1 // the root is a step
	clear(ch.sizes)
	defer func() {
		ch.ctx = context.Background()
		if r := recover(); r != nil {
			s, ok := r.(stop)
			if !ok {
				panic(r)
			}
			err = s.err
		}
	}()
	return ch.schema.Validate(doc)
}

// take is an idle checker, or the first of those that other checks put
// back and the one it has compiled meanwhile, if the tool has fewer than
// its checkers, or ctx's error. The compile takes time in the schema's size,
// more than linear in the validator (a second for 10,000 properties), and
// nothing can stop it: it is not a check's to wait for, and a tool's
// checkers are bounded.
func (t *Tool) take(ctx context.Context) (*checker, error) {
	if ch := t.spare.Swap(nil); ch != nil {
		return ch, nil
	}
	select {
	case ch := <-t.idle:
		return ch, nil
	default:
	}
	// Counted waiting before the spare is looked at again, so that a put
	// either sees the count or leaves the spare for this look.
	t.waiting.Add(1)
	defer t.waiting.Add(-1)
	if ch := t.spare.Swap(nil); ch != nil {
		return ch, nil
	}
	t.mu.Lock()
	if t.made < t.checkers {
		t.made++
		go func() {
			ch, err := t.newChecker()
			if err != nil {
				// Compiled at deploy from the same bytes, it cannot fail;
				// if it did, the checks wait for the others.
				t.mu.Lock()
				t.made--
				t.mu.Unlock()
				return
			}
			t.idle <- ch
		}()
	}
	t.mu.Unlock()
	select {
	case ch := <-t.idle:
		return ch, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put gives ch back: as the spare when no check waits, else to the waiting.
func (t *Tool) put(ch *checker) {
	if t.waiting.Load() == 0 && t.spare.CompareAndSwap(nil, ch) {
		if t.waiting.Load() == 0 {
			return
		}
		// A check began to wait meanwhile, and may have looked at the
		// spare before ch was there.
		if ch = t.spare.Swap(nil); ch == nil {
			return
		}
	}
	t.idle <- ch
}

// Validate is ValidateContext without a context: bounded by its steps only.
func (t *Tool) Validate(args []byte) error {
	return t.ValidateContext(context.Background(), args)
}

// ValidateContext checks a call's arguments: one JSON object, valid against
// the tool's parameters. A refusal wraps ErrArguments and names the field,
// or also wraps ErrCostly when the check would pass its steps (CheckSteps);
// when ctx is done first, the error wraps ctx's error and not ErrArguments.
func (t *Tool) ValidateContext(ctx context.Context, args []byte) error {
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
	sh := scan(args)
	if sh.weight == 0 {
		return fmt.Errorf("%w: %w", ErrArguments, numberError(doc, ": send a longer one as a string"))
	}
	ch, err := t.take(ctx)
	if err != nil {
		return fmt.Errorf("checking the arguments against the tool's parameters: %w", err)
	}
	limit := checkLimit(len(args), sh.depth) / sh.weight
	err = ch.check(ctx, doc, limit)
	t.put(ch)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	switch {
	case errors.As(err, &ve):
		return fmt.Errorf("%w: %s", ErrArguments, describeViolation(ve))
	case errors.Is(err, errSpent) && CheckSteps+CheckStepsPerByte*int64(len(args)) > CheckStepsMax:
		// Large arguments: the schema may be ordinary.
		return fmt.Errorf("%w: %w: %s", ErrArguments, ErrCostly, english.Sprintf(
			"checking them against the tool's parameters would take more than %d steps, the most a check of "+
				"%d bytes nested %s deep%s may take; send smaller arguments, or fewer at a time (if the "+
				"schema recurses through allOf, anyOf, oneOf or if and then, its author should simplify it)",
			limit, len(args), levels(sh.depth), sh.numbers()))
	case errors.Is(err, errSpent):
		return fmt.Errorf("%w: %w: %s", ErrArguments, ErrCostly, english.Sprintf(
			"checking them against the tool's parameters would take more than %d steps, the limit for %d bytes "+
				"nested %s deep%s; the fault is the program's: its parameters schema multiplies the work at "+
				"each level of nesting (a recursion through allOf, anyOf, oneOf or if and then, or two keywords on "+
				"the same members or items, or a long pattern), which its author should simplify; until then, send "+
				"arguments less deeply nested, or shorter strings", limit, len(args), levels(sh.depth), sh.numbers()))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("checking the arguments against the tool's parameters: %w", err)
	}
	return fmt.Errorf("%w: %v", ErrArguments, err)
}

// levels says n levels, as a refusal does.
func levels(n int) string {
	if n == 1 {
		return "1 level"
	}
	return english.Sprintf("%d levels", n)
}

// checkLimit is the steps a check of n bytes of arguments nested depth
// levels deep may take, before the weight of their numbers.
func checkLimit(n, depth int) int64 {
	limit := min(CheckSteps+CheckStepsPerByte*int64(n), CheckStepsMax)
	return limit / int64(1+depth/CheckDepth)
}

// shape is what one pass over a JSON value finds: its depth (1 for {}), its
// objects and booleans (each subschema of a schema is one), and the weight
// of its heaviest number, 0 when one is past the bounds.
type shape struct {
	depth, values int
	weight        int64
}

// numbers says, for a refusal of arguments in steps, that their numbers
// took more than a step each.
func (sh shape) numbers() string {
	if sh.weight <= 1 {
		return ""
	}
	return english.Sprintf(" with numbers as long as theirs (each taking up to %d steps)", sh.weight)
}

// scan reads the JSON value b, valid JSON, in one pass.
func scan(b []byte) shape {
	sh := shape{weight: 1}
	depth := 0
	in, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case escaped:
			escaped = false
		case in:
			if c == '\\' {
				escaped = true
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == '{' || c == '[':
			depth++
			sh.depth = max(sh.depth, depth)
			if c == '{' {
				sh.values++
			}
		case c == '}' || c == ']':
			depth--
		case c == 't' || c == 'f':
			sh.values++
		case c == '-' || '0' <= c && c <= '9':
			end, digits, exp := number(b, i)
			if sh.weight > 0 {
				if digits > MaxNumberDigits || exp > MaxNumberExponent {
					sh.weight = 0
				} else {
					sh.weight = max(sh.weight, weight(digits, exp))
				}
			}
			i = end - 1
		}
	}
	return sh
}

// number reads the JSON number that starts at b[i] to its end, counting
// the digits of its integer and fraction and the magnitude of its exponent,
// which stops growing past MaxNumberExponent.
func number(b []byte, i int) (end, digits, exp int) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		digits++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
			digits++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
			if exp <= MaxNumberExponent {
				exp = 10*exp + int(b[i]-'0')
			}
		}
	}
	return i, digits, exp
}

// weight is the steps the validator's parse of a number of digits digits
// and exponent exp stands for: 1 for an int64 (0.25 µs), 3 for
// 1.7976931348623157e308 (1.2 µs), 4 for 100 digits (an enum of them,
// compared with 10,000 items of 100 digits, took 3.2 µs a comparison, both
// sides parsed each time), 7 at the bounds. A check of arguments takes as
// many steps as it may divided by the weight of their heaviest number, as a
// step may compare two numbers.
func weight(digits, exp int) int64 { return 1 + int64(digits)/32 + int64(exp)/128 }

// numberWeight is the weight of the JSON number s.
func numberWeight(s string) int64 {
	_, digits, exp := number([]byte(s), 0)
	return weight(digits, exp)
}

// numberError names the first number past the bounds in v, by place, and
// what of it is, with hint.
func numberError(v any, hint string) error {
	at, n := numberPast(v, nil)
	_, digits, _ := number([]byte(n), 0)
	what := english.Sprintf("%d digits", digits)
	if digits <= MaxNumberDigits {
		what = english.Sprintf("an exponent beyond ±%d", MaxNumberExponent)
	}
	return fmt.Errorf("%w: at /%s: the number %s has %s; a number may have at most %d digits and an exponent "+
		"from -%d to %d%s", ErrNumber, strings.Join(at, "/"), cut(string(n), 24), what, MaxNumberDigits, MaxNumberExponent,
		MaxNumberExponent, hint)
}

// numberPast is the place of the first number past the bounds in v, and the
// number, or nil and "" when there is none; members go by name.
func numberPast(v any, at []string) ([]string, json.Number) {
	switch v := v.(type) {
	case json.Number:
		if _, digits, exp := number([]byte(v), 0); digits > MaxNumberDigits || exp > MaxNumberExponent {
			return at, v
		}
	case []any:
		for i, e := range v {
			if at, n := numberPast(e, append(at, strconv.Itoa(i))); n != "" {
				return at, n
			}
		}
	case map[string]any:
		names := slices.Sorted(maps.Keys(v))
		for _, name := range names {
			if at, n := numberPast(v[name], append(at, name)); n != "" {
				return at, n
			}
		}
	}
	return nil, ""
}

// maxLeaves bounds the violations a refusal names: a check may find one for
// each of its steps.
const maxLeaves = 16

// describeViolation flattens the validator's tree into one line per leaf, each
// naming the field by its JSON pointer, so a model can correct its call.
func describeViolation(ve *jsonschema.ValidationError) string {
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	more := 0
	if len(leaves) > maxLeaves {
		more = len(leaves) - maxLeaves
		leaves = firstLeaves(leaves)
	}
	lines := make([]string, len(leaves))
	for i, e := range leaves {
		loc := "/" + strings.Join(e.InstanceLocation, "/")
		lines[i] = fmt.Sprintf("at %s: %s", loc, clip(e.ErrorKind.LocalizedString(english)))
	}
	sort.Strings(lines)
	lines = slices.Compact(lines)
	if more > 0 {
		lines = append(lines, english.Sprintf("and %d more", more))
	}
	return strings.Join(lines, "; ")
}

// maxViolation bounds what a refusal says of one violation: the validator
// quotes the whole enum a value is not in.
const maxViolation = 200

// clip cuts s to about maxViolation bytes, on a character's boundary.
func clip(s string) string { return cut(s, maxViolation) }

// cut cuts s to about n bytes, on a character's boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// firstLeaves is the maxLeaves first of leaves by place, then by the
// schema's: the validator's own order follows map iteration. It keeps them
// in a small sorted window, leaves being as many as a check's steps.
func firstLeaves(leaves []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	order := func(a, b *jsonschema.ValidationError) int {
		return cmp.Or(slices.Compare(a.InstanceLocation, b.InstanceLocation), strings.Compare(a.SchemaURL, b.SchemaURL))
	}
	first := make([]*jsonschema.ValidationError, 0, maxLeaves+1)
	for _, e := range leaves {
		if len(first) == maxLeaves && order(e, first[maxLeaves-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(first, e, order)
		first = slices.Insert(first, i, e)
		if len(first) > maxLeaves {
			first = first[:maxLeaves]
		}
	}
	return first
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
