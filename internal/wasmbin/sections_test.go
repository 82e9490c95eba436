package wasmbin

import (
	"errors"
	"fmt"
	"testing"
)

func TestSections(t *testing.T) {
	custom := AppendName(nil, "n")
	tests := []struct {
		name   string
		module []byte
		want   []Section
		err    string // of the walk's last yield
		is     error  // the sentinel err wraps
	}{
		{name: "header only", module: []byte(Header)},
		{name: "shorter than a header", module: []byte(Magic), err: "header: unexpected end", is: ErrUnexpectedEnd},
		{
			name:   "two sections",
			module: AppendSection(AppendSection([]byte(Header), SectionType, []byte{0}), SectionCustom, custom),
			want: []Section{
				{ID: SectionType, Payload: []byte{0}, Start: 8, Offset: 10, End: 11},
				{ID: SectionCustom, Payload: custom, Start: 11, Offset: 13, End: 15},
			},
		},
		{
			name:   "empty payload",
			module: AppendSection([]byte(Header), SectionStart, nil),
			want:   []Section{{ID: SectionStart, Payload: []byte{}, Start: 8, Offset: 10, End: 10}},
		},
		{
			name:   "size padded",
			module: []byte(Header + "\x01\x81\x80\x00x"),
			want:   []Section{{ID: SectionType, Payload: []byte("x"), Start: 8, Offset: 12, End: 13}},
		},
		{name: "id alone", module: []byte(Header + "\x01"), err: "section header: unexpected end", is: ErrUnexpectedEnd},
		{name: "size truncated", module: []byte(Header + "\x01\x80"), err: "section header: unexpected end", is: ErrUnexpectedEnd},
		{name: "size over 32 bits", module: []byte(Header + "\x01\xff\xff\xff\xff\x1f"), err: "section header: integer too large", is: ErrTooLarge},
		{name: "size past the end", module: []byte(Header + "\x01\x03ab"), err: "section 1: unexpected end", is: ErrUnexpectedEnd},
		{name: "size of 2^32-1", module: []byte(Header + "\x0b\xff\xff\xff\xff\x0fab"), err: "section 11: unexpected end", is: ErrUnexpectedEnd},
		{
			name:   "a good section, then one past the end",
			module: []byte(Header + "\x00\x01\x00\x02\x02a"),
			want:   []Section{{ID: SectionCustom, Payload: []byte{0}, Start: 8, Offset: 10, End: 11}},
			err:    "section 2: unexpected end",
			is:     ErrUnexpectedEnd,
		},
		{name: "any id", module: []byte(Header + "\xff\x00"), want: []Section{{ID: 0xff, Payload: []byte{}, Start: 8, Offset: 10, End: 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Section
			var err error
			for s, e := range Sections(tt.module) {
				if err != nil {
					t.Fatalf("yielded %+v after %v", s, err)
				}
				if err = e; e == nil {
					got = append(got, s)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("sections:\n got %+v\nwant %+v", got, tt.want)
			}
			// The text names where the walk stopped; the sentinel, why.
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || err.Error() != tt.err) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v, want it to wrap %v", err, tt.is)
			}
		})
	}
}

func TestSectionsStop(t *testing.T) {
	module := AppendSection(AppendSection([]byte(Header), SectionType, nil), SectionImport, nil)
	n := 0
	for range Sections(module) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("%d sections after a break", n)
	}
}

func ExampleSections() {
	module := []byte(Header)
	module = AppendSection(module, SectionMemory, []byte{1, 0, 1})
	module = AppendSection(module, SectionCustom, append(AppendName(nil, "hello"), "world"...))
	for sec, err := range Sections(module) {
		if err != nil {
			fmt.Println(err)
			return
		}
		r := NewReader(sec.Payload)
		switch sec.ID {
		case SectionMemory:
			n := r.Count()
			flags, pages := r.Byte(), r.U32()
			fmt.Println("memories:", n, "flags:", flags, "pages:", pages, "at", sec.Start, r.Err())
		case SectionCustom:
			name := r.Name()
			fmt.Printf("custom %q: %q at %d\n", name, sec.Payload[r.Offset():], sec.Start)
		}
	}
	// Output:
	// memories: 1 flags: 0 pages: 1 at 8 <nil>
	// custom "hello": "world" at 13
}
