package manifest

import (
	"errors"
	"fmt"

	"github.com/berm-dev/berm/internal/wasmbin"
)

// ValueType is a WebAssembly value type, by its binary encoding.
type ValueType byte

const (
	I32       ValueType = 0x7f
	I64       ValueType = 0x7e
	F32       ValueType = 0x7d
	F64       ValueType = 0x7c
	V128      ValueType = 0x7b
	FuncRef   ValueType = 0x70
	ExternRef ValueType = 0x6f
)

func (t ValueType) String() string {
	switch t {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	case V128:
		return "v128"
	case FuncRef:
		return "funcref"
	case ExternRef:
		return "externref"
	}
	return fmt.Sprintf("0x%02x", byte(t))
}

// FuncType is the signature of a function.
type FuncType struct {
	Params  []ValueType `json:"params"`
	Results []ValueType `json:"results"`
}

// Equal reports whether two signatures are the same.
func (f FuncType) Equal(g FuncType) bool {
	return string(valueBytes(f.Params)) == string(valueBytes(g.Params)) &&
		string(valueBytes(f.Results)) == string(valueBytes(g.Results))
}

func valueBytes(ts []ValueType) []byte {
	b := make([]byte, len(ts))
	for i, t := range ts {
		b[i] = byte(t)
	}
	return b
}

// String renders the signature as ABI.md writes it: "[i64 i32 i32] -> [i64]".
func (f FuncType) String() string {
	return "[" + joinTypes(f.Params) + "] -> [" + joinTypes(f.Results) + "]"
}

func joinTypes(ts []ValueType) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += " "
		}
		s += t.String()
	}
	return s
}

// ExternKind is what an import or export is.
type ExternKind byte

const (
	KindFunc   ExternKind = 0
	KindTable  ExternKind = 1
	KindMemory ExternKind = 2
	KindGlobal ExternKind = 3
	KindTag    ExternKind = 4
)

func (k ExternKind) String() string {
	switch k {
	case KindFunc:
		return "func"
	case KindTable:
		return "table"
	case KindMemory:
		return "memory"
	case KindGlobal:
		return "global"
	case KindTag:
		return "tag"
	}
	return fmt.Sprintf("kind 0x%02x", byte(k))
}

// MarshalText names the kind in JSON output.
func (k ExternKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// MarshalText names the type in JSON output.
func (t ValueType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads a type as MarshalText names it.
func (t *ValueType) UnmarshalText(b []byte) error {
	for _, v := range []ValueType{I32, I64, F32, F64, V128, FuncRef, ExternRef} {
		if v.String() == string(b) {
			*t = v
			return nil
		}
	}
	return fmt.Errorf("unknown value type %q", b)
}

// UnmarshalText reads a kind as MarshalText names it.
func (k *ExternKind) UnmarshalText(b []byte) error {
	for v := KindFunc; v <= KindTag; v++ {
		if v.String() == string(b) {
			*k = v
			return nil
		}
	}
	return fmt.Errorf("unknown kind %q", b)
}

// Import is one import of the module. Type is set for functions only.
type Import struct {
	Module string     `json:"module"`
	Name   string     `json:"name"`
	Kind   ExternKind `json:"kind"`
	Type   *FuncType  `json:"type,omitempty"`
}

// Export is one export of the module. Type is set for functions only.
type Export struct {
	Name string     `json:"name"`
	Kind ExternKind `json:"kind"`
	Type *FuncType  `json:"type,omitempty"`
}

// Table is one table the module defines, by its limits in entries. Max is
// nil when the table declares no maximum, and may then grow to 2^32-1
// entries. Imported tables are in Imports.
type Table struct {
	Min uint64  `json:"min"`
	Max *uint64 `json:"max,omitempty"`
}

// Counts are how many of the parts an instance is made of a module defines,
// beside its memory and tables: wazero builds every global, element entry
// and segment anew in each instance, and compiles each function once. A
// host bounds them at deploy (the module's size alone does not: a 4 MB
// element segment holds 4 million entries).
type Counts struct {
	// Functions defined in the module; the imported ones are in Imports.
	Functions uint64 `json:"functions"`
	// Globals defined in the module.
	Globals uint64 `json:"globals"`
	// ElementSegments of every mode (active, passive, declarative), and
	// the entries of all of them together.
	ElementSegments uint64 `json:"element_segments"`
	ElementEntries  uint64 `json:"element_entries"`
	// DataSegments, active and passive.
	DataSegments uint64 `json:"data_segments"`
}

// module is what berm reads of a module's structure: enough to check the ABI's
// rules without decoding code, let alone compiling it.
type module struct {
	imports     []Import
	exports     []Export
	funcNames   map[uint32]string // the first export of each function exported, by index
	manifests   [][]byte          // payloads of every .berm.abi section
	tables      []Table           // the tables the module defines, in order
	memoryPages uint64            // declared minimum of the first memory, in 64 KiB pages
	hasMemory   bool
	counts      Counts
}

const sectionName = ".berm.abi"

// parseModule reads the sections of a module that the ABI speaks of. Each
// refusal names the section at fault, and the first problem in it.
func parseModule(b []byte) (*module, error) {
	if len(b) < len(wasmbin.Header) || string(b[:4]) != wasmbin.Magic {
		return nil, ErrNotModule
	}
	if string(b[4:8]) != wasmbin.Version {
		// A component or a future binary format: not a core module of version 1.
		return nil, fmt.Errorf("binary version %x: %w", b[4:8], ErrNotModule)
	}
	m := &module{imports: []Import{}, exports: []Export{}, tables: []Table{}}
	var types []FuncType
	var funcs []uint32 // type index of every function, imported ones first
	lastRank := 0
	for sec, err := range wasmbin.Sections(b) {
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrMalformed)
		}
		if sec.ID != wasmbin.SectionCustom {
			rank := sectionRank(sec.ID)
			if rank == 0 {
				return nil, malformed(fmt.Sprintf("section %d", sec.ID), errors.New("unknown section id"))
			}
			if rank <= lastRank {
				return nil, malformed(fmt.Sprintf("section %d", sec.ID), errors.New("out of order or repeated"))
			}
			lastRank = rank
		}
		s := wasmbin.NewReader(sec.Payload)
		switch sec.ID {
		case wasmbin.SectionCustom:
			name, contents, err := customSection(sec.Payload)
			if err != nil {
				return nil, malformed("custom section", err)
			}
			if name == sectionName {
				m.manifests = append(m.manifests, contents)
			}
			if name == "name" && len(contents) > MaxNameSection {
				return nil, fmt.Errorf("custom section \"name\": %d bytes, over the limit of %d (the names are kept for the program's life): %w",
					len(contents), MaxNameSection, ErrTooMany)
			}
		case wasmbin.SectionType:
			if types, err = parseTypes(s); err != nil {
				return nil, malformed("type section", err)
			}
		case wasmbin.SectionImport:
			if err := parseImports(s, m, types, &funcs); err != nil {
				return nil, malformed("import section", err)
			}
		case wasmbin.SectionFunction:
			n := s.Count()
			if n > maxFunctions {
				return nil, malformed("function section", tooMany(n, "functions", maxFunctions))
			}
			for range n {
				t := s.U32()
				if s.Err() != nil {
					break
				}
				funcs = append(funcs, t)
			}
			if err := s.Err(); err != nil {
				return nil, malformed("function section", err)
			}
			m.counts.Functions = uint64(n)
		case wasmbin.SectionTable:
			n := s.Count()
			if n > maxTables {
				return nil, malformed("table section", tooMany(n, "tables", maxTables))
			}
			for range n {
				t, err := table(s)
				if err != nil {
					return nil, malformed("table section", err)
				}
				m.tables = append(m.tables, t)
			}
			if err := s.Err(); err != nil {
				return nil, malformed("table section", err)
			}
		case wasmbin.SectionMemory:
			for i := range s.Count() {
				min, _, err := limits(s)
				if err != nil {
					return nil, malformed("memory section", err)
				}
				if i == 0 && !m.hasMemory {
					m.memoryPages, m.hasMemory = min, true
				}
			}
			if err := s.Err(); err != nil {
				return nil, malformed("memory section", err)
			}
		case wasmbin.SectionGlobal:
			// The count alone: each global is wazero's to decode.
			if m.counts.Globals = uint64(s.Count()); s.Err() != nil {
				return nil, malformed("global section", s.Err())
			}
		case wasmbin.SectionExport:
			if err := parseExports(s, m, types, funcs); err != nil {
				return nil, malformed("export section", err)
			}
		case wasmbin.SectionElement:
			if err := parseElements(s, &m.counts); err != nil {
				return nil, malformed("element section", err)
			}
		case wasmbin.SectionCode:
			if err := parseCode(s, m, types, funcs); err != nil {
				return nil, malformed("code section", err)
			}
		case wasmbin.SectionData:
			if m.counts.DataSegments = uint64(s.Count()); s.Err() != nil {
				return nil, malformed("data section", s.Err())
			}
		}
	}
	return m, nil
}

// customSection splits a custom section's payload into its name and what
// follows it.
func customSection(payload []byte) (name string, contents []byte, err error) {
	r := wasmbin.NewReader(payload)
	name = r.Name()
	return name, payload[r.Offset():], r.Err()
}

// sectionRank orders the known non-custom sections as the binary format requires
// (the tag section 13 sits between memory and global, data count 12 before code).
func sectionRank(id byte) int {
	switch {
	case id >= 1 && id <= 5:
		return int(id)
	case id == 13:
		return 6
	case id >= 6 && id <= 9:
		return int(id) + 1
	case id == 12:
		return 11
	case id == 10 || id == 11:
		return int(id) + 2
	}
	return 0
}

func malformed(where string, err error) error {
	if errors.Is(err, ErrTooMany) || errors.Is(err, ErrCompileCost) {
		return fmt.Errorf("%s: %w", where, err)
	}
	return fmt.Errorf("%s: %v: %w", where, err, ErrMalformed)
}

// The most of each part berm reads of a module, which it holds decoded:
// many times what real programs declare (the Go examples: 14 types, 17 to
// 24 imports, 2,400 functions, 1 table, 6 exports), and more than a host
// runs (runtime.Check bounds them lower), so that reading an image costs
// memory and time in proportion to what could run, whatever the image
// declares: a type section of 20 million types (57 MB) took 5.7 s and 900
// MB to read, and wazero 20 s and 11 GB to compile.
const (
	maxTypes     = 1 << 16
	maxImports   = 1 << 16
	maxFunctions = 1 << 20
	maxTables    = 1 << 16
	maxExports   = 1 << 16
)

// The most bytes of names berm reads of a module, where wazero and berm
// keep each name for the program's life, several times over: 60,000
// exports of 900-byte names (54 MB) held 672 MB in berm serve, and as many
// local names in a name section 545 MB. Real programs' are far less: the
// Go examples' imports and exports take under 1 KiB, the Go compiler's
// name section 1 MB.
const (
	// MaxNames bounds the names of a module's imports (module and name),
	// and apart those of its exports, in bytes.
	MaxNames = 1 << 20
	// MaxNameSection bounds the custom section "name", in bytes.
	MaxNameSection = 4 << 20
)

// tooMany refuses n parts of a kind past the most berm reads.
func tooMany(n int, what string, most int) error {
	return fmt.Errorf("%d %s, over the limit of %d: %w", n, what, most, ErrTooMany)
}

// tooManyNames refuses the names of a kind of part past the most berm
// reads, when they reach it: what follows is not read.
func tooManyNames(what string, most int) error {
	return fmt.Errorf("names of the %s: over the limit of %d bytes (the names are kept for the program's life): %w", what, most, ErrTooMany)
}

// The parsers below read with a wasmbin.Reader, whose first failure sticks:
// each checks it before refusing a value, so the refusal names the first
// problem, as a reader stopping at once would.

func valueType(s *wasmbin.Reader) (ValueType, error) {
	c := s.Byte()
	if err := s.Err(); err != nil {
		return 0, err
	}
	switch t := ValueType(c); t {
	case I32, I64, F32, F64, V128, FuncRef, ExternRef:
		return t, nil
	}
	return 0, fmt.Errorf("unsupported value type 0x%02x", c)
}

// limits reads a table or memory limits and returns the minimum and the
// maximum, nil when there is none.
func limits(s *wasmbin.Reader) (uint64, *uint64, error) {
	flags := s.Byte()
	if err := s.Err(); err != nil {
		return 0, nil, err
	}
	if flags > 0x07 {
		return 0, nil, fmt.Errorf("bad limits flags 0x%02x", flags)
	}
	bound := func() uint64 { return uint64(s.U32()) }
	if flags&0x04 != 0 { // 64-bit
		bound = s.U64
	}
	min := bound()
	var max *uint64
	if flags&0x01 != 0 {
		m := bound()
		max = &m
	}
	if err := s.Err(); err != nil {
		return 0, nil, err
	}
	return min, max, nil
}

// table reads a table type, and the initializer that follows it when the
// entry opens with 0x40 0x00 (typed function references), to reach the next.
func table(s *wasmbin.Reader) (Table, error) {
	init := false
	b := s.Byte()
	if b == 0x40 {
		if r := s.Byte(); r != 0x00 && s.Err() == nil {
			return Table{}, fmt.Errorf("table with an initializer: reserved byte 0x%02x", r)
		}
		init, b = true, s.Byte()
	}
	if b == 0x63 || b == 0x64 { // (ref null? heaptype): an s33
		s.SkipLEB()
	}
	// Any other reference type is one byte; which are valid is wazero's to say.
	min, max, err := limits(s)
	if err != nil {
		return Table{}, err
	}
	if init {
		if err := s.SkipConstExpr(); err != nil {
			return Table{}, fmt.Errorf("table initializer: %v", err)
		}
	}
	return Table{Min: min, Max: max}, nil
}

func parseTypes(s *wasmbin.Reader) ([]FuncType, error) {
	n := s.Count()
	if n > maxTypes {
		return nil, tooMany(n, "types", maxTypes)
	}
	types := make([]FuncType, 0, n)
	for range n {
		if form := s.Byte(); form != 0x60 {
			if err := s.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("unsupported type form 0x%02x", form)
		}
		ft := FuncType{Params: []ValueType{}, Results: []ValueType{}}
		for _, dst := range []*[]ValueType{&ft.Params, &ft.Results} {
			for range s.Count() {
				t, err := valueType(s)
				if err != nil {
					return nil, err
				}
				*dst = append(*dst, t)
			}
		}
		types = append(types, ft)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return types, nil
}

func funcType(types []FuncType, idx uint32) (*FuncType, error) {
	if uint64(idx) >= uint64(len(types)) {
		return nil, fmt.Errorf("type index %d out of range", idx)
	}
	t := types[idx]
	return &t, nil
}

func parseImports(s *wasmbin.Reader, m *module, types []FuncType, funcs *[]uint32) error {
	n := s.Count()
	if n > maxImports {
		return tooMany(n, "imports", maxImports)
	}
	names := 0
	for range n {
		imp := Import{Module: s.Name(), Name: s.Name()}
		kind := s.Byte()
		if err := s.Err(); err != nil {
			return err
		}
		if names += len(imp.Module) + len(imp.Name); names > MaxNames {
			return tooManyNames("imports", MaxNames)
		}
		imp.Kind = ExternKind(kind)
		switch imp.Kind {
		case KindFunc:
			idx := s.U32()
			if err := s.Err(); err != nil {
				return err
			}
			t, err := funcType(types, idx)
			if err != nil {
				return err
			}
			imp.Type = t
			*funcs = append(*funcs, idx)
		case KindTable:
			if _, err := valueType(s); err != nil {
				return err
			}
			if _, _, err := limits(s); err != nil {
				return err
			}
		case KindMemory:
			min, _, err := limits(s)
			if err != nil {
				return err
			}
			if !m.hasMemory {
				m.memoryPages, m.hasMemory = min, true
			}
		case KindGlobal:
			if _, err := valueType(s); err != nil {
				return err
			}
			s.Byte() // mutability
		case KindTag:
			s.Byte() // attribute
			s.U32()  // type index
		default:
			return fmt.Errorf("import %s.%s: unknown kind 0x%02x", imp.Module, imp.Name, kind)
		}
		if err := s.Err(); err != nil {
			return err
		}
		m.imports = append(m.imports, imp)
	}
	return s.Err()
}

func parseExports(s *wasmbin.Reader, m *module, types []FuncType, funcs []uint32) error {
	n := s.Count()
	if n > maxExports {
		return tooMany(n, "exports", maxExports)
	}
	names := 0
	for range n {
		exp := Export{Name: s.Name()}
		kind := s.Byte()
		idx := s.U32()
		if err := s.Err(); err != nil {
			return err
		}
		if names += len(exp.Name); names > MaxNames {
			return tooManyNames("exports", MaxNames)
		}
		exp.Kind = ExternKind(kind)
		if exp.Kind > KindTag {
			return fmt.Errorf("export %q: unknown kind 0x%02x", exp.Name, kind)
		}
		if exp.Kind == KindFunc {
			if uint64(idx) >= uint64(len(funcs)) {
				return fmt.Errorf("export %q: function index %d out of range", exp.Name, idx)
			}
			var err error
			if exp.Type, err = funcType(types, funcs[idx]); err != nil {
				return fmt.Errorf("export %q: %v", exp.Name, err)
			}
			if m.funcNames == nil {
				m.funcNames = map[uint32]string{}
			}
			if _, ok := m.funcNames[idx]; !ok {
				m.funcNames[idx] = exp.Name
			}
		}
		m.exports = append(m.exports, exp)
	}
	return s.Err()
}

// parseElements counts the element segments and their entries, reading
// every segment as wazero 1.12 does (its flags a u32, 0 to 7), since only
// the segments' own lengths tell where the next begins. Which reference
// types and expressions are valid is wazero's to judge; an encoding this
// cannot read, wazero refuses too.
func parseElements(s *wasmbin.Reader, c *Counts) error {
	n := s.Count()
	for i := range n {
		flags := s.U32()
		if err := s.Err(); err != nil {
			return err
		}
		if flags > 7 {
			return fmt.Errorf("segment %d: unknown flags %d", i, flags)
		}
		if flags&0x02 != 0 && flags&0x01 == 0 { // active with a table index
			s.U32()
		}
		if flags&0x01 == 0 { // active: the offset
			if err := s.SkipConstExpr(); err != nil {
				return fmt.Errorf("segment %d: offset: %v", i, err)
			}
		}
		if flags&0x03 != 0 { // the element kind, or with expressions the reference type
			if b := s.Byte(); flags&0x04 != 0 && (b == 0x63 || b == 0x64) {
				s.SkipLEB() // (ref null? heaptype)
			}
		}
		entries := s.Count()
		for range entries {
			if flags&0x04 != 0 {
				if err := s.SkipConstExpr(); err != nil {
					return fmt.Errorf("segment %d: entry: %v", i, err)
				}
			} else {
				s.U32() // a function index
			}
		}
		if err := s.Err(); err != nil {
			return err
		}
		c.ElementEntries += uint64(entries)
	}
	if err := s.Err(); err != nil {
		return err
	}
	c.ElementSegments = uint64(n)
	return nil
}

// The most a function's code may cost wazero 1.12's optimizing compiler,
// which berm compiles with, and which looks at no context while it compiles
// a function. Its time grows with the square of a function's blocks (it
// walks the dominator tree up from each: 8,192 ifs in a row take a second,
// 30,000 took 23 s) and with its blocks times the values they carry, and
// their square (it gives a block a parameter for each local read after it,
// and compares each with every argument of each branch to the block: 8,000
// locals read after 25 ifs took 1.8 s, in 40 KB), its memory with a
// function's size (a body of 8 MB took 1.3 GB). Go's linker writes
// functions of up to 1,889 blocks (its examples; 26,169 in the Go compiler
// itself, which takes 2.6 s to compile), 20 locals and 29 KB; LLVM's of up
// to 616 blocks and 811 locals (zig cc at -O0).
const (
	// MaxFunctionSize bounds a function body, in bytes.
	MaxFunctionSize = 1 << 20
	// MaxLocals bounds a function's locals, parameters and results
	// together (wazero 1.12 panics past 2^28, after 25 s and 13 GB).
	MaxLocals = 1 << 16
	// MaxFunctionWeight bounds what a function weighs (FunctionWeight):
	// 0.8 to 2 s of wazero's compile at the bound, whatever the
	// function's shape (8,192 blocks and no locals, 1,000 blocks and 440
	// locals, none and 18,700 of v128). Go's examples' heaviest function
	// weighs 4,600,000, zig cc's 24,000,000 (131 blocks, 815 values).
	MaxFunctionWeight = 1 << 26
	// A module's functions together may weigh MaxCodeWeight and
	// CodeWeightPerByte for each byte of its code section, so that code
	// made of functions at the bound costs wazero a few microseconds a
	// byte to compile (10 functions at it and 4 MB more of code took 10 s),
	// as code of Go's takes 0.6: no more than the image's size allows for.
	// Go's examples weigh 65 a byte (hello 142,000,000 for 2.2 MB of
	// code, a third of its bound).
	MaxCodeWeight     = 1 << 27
	CodeWeightPerByte = 128
	// MaxModuleWeight bounds the module's functions together whatever
	// its size, about 15 s of wazero's compile: code that costs nothing to
	// compile (nop after nop) bought weight for functions at the bound,
	// 125 of them in 65 MB compiling past two minutes. Go's examples weigh
	// an eighth of it: a Go program of more than 16 MB of code (an image of
	// about 25 MB) is refused.
	MaxModuleWeight = 1 << 30
)

// FunctionWeight is what a function of that many blocks and branches
// (wasmbin.Shape's Blocks), whose blocks carry that many values (its
// locals, parameters and results, and the most a block type names), costs
// wazero to compile beyond its size, in units of about 16 ns here: the
// square of its blocks, and its blocks times its values times 360 more
// than them, times 3 over 16 (fitted to functions whose every local is
// read after every block, the most it can cost, and to locals of v128,
// which cost three times what i32s do; real code reads fewer, and takes
// less).
func FunctionWeight(blocks, values uint64) uint64 {
	return blocks*blocks + values*(values+360)*blocks*3/16
}

// parseCode reads each function body's shape and holds it to the bounds
// above; types are the module's, funcs the type of every function, the
// imported ones first. A count or a body that does not match the function
// section is wazero's to refuse.
func parseCode(s *wasmbin.Reader, m *module, types []FuncType, funcs []uint32) error {
	arity := func(t uint32) uint64 {
		if uint64(t) >= uint64(len(types)) {
			return 0
		}
		return uint64(len(types[t].Params) + len(types[t].Results))
	}
	imported := len(funcs) - int(m.counts.Functions)
	var weight uint64
	code := s.Len()
	for i := range s.Count() {
		body := s.Bytes(s.U32())
		if err := s.Err(); err != nil {
			return err
		}
		index := uint32(imported + i)
		if len(body) > MaxFunctionSize {
			return fmt.Errorf("%s: %d bytes of code, over the limit of %d (wazero holds all it makes of a function while it compiles it): %w",
				m.funcName(index), len(body), MaxFunctionSize, ErrCompileCost)
		}
		shape, err := wasmbin.ReadShape(body, arity)
		if err != nil {
			return fmt.Errorf("%s: %v", m.funcName(index), err)
		}
		variables := shape.Locals
		if int(index) < len(funcs) {
			variables += arity(funcs[index])
		}
		if variables > MaxLocals {
			return fmt.Errorf("%s: %d locals, parameters and results, over the limit of %d (wazero makes a variable of each, in every compile and every call): %w",
				m.funcName(index), variables, MaxLocals, ErrCompileCost)
		}
		// blocks is under the body's size, 2^20, and values under the type
		// section's, 2^26: capped, their weight cannot overflow, and either
		// cap is far past the bound.
		// The deadline's rewrite adds a block at the function's entry,
		// which carries every local: 65,000 of them and no block of the
		// image's took 15 s to compile.
		blocks, values := shape.Blocks+1, min(variables+shape.Arity, 1<<20)
		w := FunctionWeight(min(blocks, 1<<20), values)
		if w > MaxFunctionWeight {
			return fmt.Errorf("%s: %d blocks and branches (the deadline's own included) carrying %d values (locals, parameters, results) weigh %d, over the limit of %d (wazero's compile time grows with the square of the blocks, and with the blocks times the square of the values: a second or so at the limit); split the function, or give it fewer locals: %w",
				m.funcName(index), blocks, variables+shape.Arity, w, MaxFunctionWeight, ErrCompileCost)
		}
		weight += w
	}
	if most := min(MaxCodeWeight+CodeWeightPerByte*uint64(code), MaxModuleWeight); weight > most {
		return fmt.Errorf("its functions weigh %d together (as each is weighed against its own limit), over the limit of %d for its %d bytes of code (%d and %d a byte, at most %d: compiling them would take wazero far longer than code of that size); split the program, or make its heaviest functions lighter: %w",
			weight, most, code, MaxCodeWeight, CodeWeightPerByte, MaxModuleWeight, ErrCompileCost)
	}
	return s.Err()
}

// funcName names the function of index (imports first) as a refusal does:
// by its index, and the first export of it, if any.
func (m *module) funcName(index uint32) string {
	if name, ok := m.funcNames[index]; ok {
		return fmt.Sprintf("function %d (export %q)", index, name)
	}
	return fmt.Sprintf("function %d", index)
}
