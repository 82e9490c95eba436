package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berm-dev/berm/runtime/store"
)

// The cases of a program's key-value data: Get, Set, Delete, the limits,
// the quota in blocks and DataUsage, on one handle and across several.

func set(t *testing.T, s store.State, program, key, value string) {
	t.Helper()
	if err := s.Set(t.Context(), program, []byte(key), []byte(value)); err != nil {
		t.Fatalf("Set(%s, %q): %v", program, key, err)
	}
}

func testData(t *testing.T, open func() store.State) {
	s := open()
	if v, ok, err := s.Get(t.Context(), "p", []byte("k")); ok || err != nil || v != nil {
		t.Fatalf("absent key: %q, %v, %v", v, ok, err)
	}
	set(t, s, "p", "k", "v1")
	set(t, s, "p", "k", "v2")
	other := open()
	if v, ok, err := other.Get(t.Context(), "p", []byte("k")); !ok || err != nil || string(v) != "v2" {
		t.Fatalf("Get = %q, %v, %v; want v2", v, ok, err)
	}
	if _, ok, _ := s.Get(t.Context(), "q", []byte("k")); ok {
		t.Fatal("program q sees program p's data")
	}
	// Data needs no deployment: Remove keeping data leaves it without one.
	if _, err := s.Deployment("p"); !errors.Is(err, store.ErrNotDeployed) {
		t.Fatalf("Deployment(p) = %v", err)
	}

	// Empty keys and values are keys and values like any other, and an
	// empty value is not an absent one.
	if err := s.Set(t.Context(), "p", nil, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := other.Get(t.Context(), "p", nil); !ok || err != nil || len(v) != 0 {
		t.Fatalf("empty key: %q, %v, %v", v, ok, err)
	}
	if v, ok, err := other.Get(t.Context(), "p", []byte{}); !ok || err != nil || len(v) != 0 {
		t.Fatalf("empty key as []byte{}: %q, %v, %v", v, ok, err)
	}
	set(t, s, "p", "empty", "")
	if v, ok, err := other.Get(t.Context(), "p", []byte("empty")); !ok || err != nil || len(v) != 0 {
		t.Fatalf("empty value: %q, %v, %v", v, ok, err)
	}

	if err := other.Delete(t.Context(), "p", []byte("k")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(t.Context(), "p", []byte("k")); ok {
		t.Fatal("deleted key still there")
	}
	if err := s.Delete(t.Context(), "p", []byte("k")); err != nil {
		t.Fatalf("deleting an absent key: %v", err)
	}
	if err := s.Delete(t.Context(), "nodata", []byte("k")); err != nil {
		t.Fatalf("deleting from a program without data: %v", err)
	}
	if v, ok, _ := s.Get(t.Context(), "p", []byte("empty")); !ok || len(v) != 0 {
		t.Fatalf("a delete took another key: %q, %v", v, ok)
	}
	// What Get returned is the caller's: changing it changes nothing stored.
	set(t, s, "p", "mine", "value")
	v, _, _ := s.Get(t.Context(), "p", []byte("mine"))
	copy(v, "XXXXX")
	if v, _, _ := s.Get(t.Context(), "p", []byte("mine")); string(v) != "value" {
		t.Fatalf("Get's slice is the store's: %q", v)
	}
}

// testBinaryKeys: keys and values are bytes, not text: NUL, invalid UTF-8,
// keys that are prefixes of others, keys that differ in case.
func testBinaryKeys(t *testing.T, open func() store.State) {
	s := open()
	var all []byte
	for b := range 256 {
		all = append(all, byte(b))
	}
	keys := [][]byte{
		{0}, {0, 0}, {0, 'a'}, {'a', 0}, {'a'}, {'A'}, {0xff}, {0xff, 0xfe}, {0xc3, 0x28},
		[]byte("a\x00b"), []byte("a\x00c"), []byte("prefix"), []byte("prefix-longer"), all,
		[]byte("%s'\";--\\"), []byte("é"), []byte("e\u0301"),
	}
	for i, k := range keys {
		value := append([]byte{byte(i), 0}, all...)
		if err := s.Set(t.Context(), "p", k, value); err != nil {
			t.Fatalf("Set(%q): %v", k, err)
		}
	}
	other := open()
	for i, k := range keys {
		v, ok, err := other.Get(t.Context(), "p", k)
		if !ok || err != nil || len(v) != 258 || v[0] != byte(i) || v[1] != 0 || string(v[2:]) != string(all) {
			t.Errorf("Get(%q) = %q, %v, %v", k, v, ok, err)
		}
	}
	if _, ok, _ := other.Get(t.Context(), "p", []byte("prefix-")); ok {
		t.Error("Get of a key never set, between two that were")
	}
	if err := other.Delete(t.Context(), "p", []byte{0}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(t.Context(), "p", []byte{0}); ok {
		t.Error("deleted key still there")
	}
	if v, ok, _ := s.Get(t.Context(), "p", []byte{0, 0}); !ok || v[0] != 1 {
		t.Errorf("a delete of \\x00 touched \\x00\\x00: %q, %v", v, ok)
	}
}

// testDataLimits: a key of MaxKey bytes and a value of MaxValue bytes pass;
// a byte more is ErrQuota, and leaves what was there.
func testDataLimits(t *testing.T, open func() store.State) {
	s := open()
	key := make([]byte, store.MaxKey)
	for i := range key {
		key[i] = byte(i * 7)
	}
	value := make([]byte, store.MaxValue)
	for i := range value {
		value[i] = byte(i * 13)
	}
	if err := s.Set(t.Context(), "p", key, value); err != nil {
		t.Fatalf("key of MaxKey and value of MaxValue: %v", err)
	}
	if v, ok, err := open().Get(t.Context(), "p", key); !ok || err != nil || string(v) != string(value) {
		t.Fatalf("Get of MaxKey = %d bytes, %v, %v", len(v), ok, err)
	}
	if _, ok, err := s.Get(t.Context(), "p", make([]byte, store.MaxKey+1)); ok || err != nil {
		t.Errorf("Get of a key over MaxKey = %v, %v; want absent", ok, err)
	}
	err := s.Set(t.Context(), "p", make([]byte, store.MaxKey+1), nil)
	if !errors.Is(err, store.ErrQuota) {
		t.Fatalf("key of MaxKey+1 bytes: %v, want ErrQuota", err)
	}
	noPath(t, err)
	err = s.Set(t.Context(), "p", key, make([]byte, store.MaxValue+1))
	if !errors.Is(err, store.ErrQuota) {
		t.Fatalf("value of MaxValue+1 bytes: %v, want ErrQuota", err)
	}
	noPath(t, err)
	if v, _, _ := s.Get(t.Context(), "p", key); string(v) != string(value) {
		t.Fatal("a refused Set changed the value")
	}
}

// noPath: the program reads quota errors, which name no file.
func noPath(t *testing.T, err error) {
	t.Helper()
	if strings.Contains(err.Error(), "/") {
		t.Errorf("quota message with a path: %v", err)
	}
}

// charged is a value for key whose entry is charged exactly blocks blocks:
// an entry takes 4 bytes, the key and the value, in whole blocks.
func charged(key string, blocks int) []byte {
	return make([]byte, blocks*store.BlockSize-4-len(key))
}

func usage(t *testing.T, s store.State, program string, want int64) {
	t.Helper()
	if got, err := s.DataUsage(program); err != nil || got != want {
		t.Errorf("DataUsage(%s) = %d, %v; want %d (%d blocks)", program, got, err, want, want/store.BlockSize)
	}
}

// testDataUsage: every entry is charged its 4 bytes, key and value in whole
// blocks, one at least; each handle's count follows the others' writes.
func testDataUsage(t *testing.T, open func() store.State) {
	s, other := open(), open()
	usage(t, s, "p", 0) // no data yet, and none made by asking
	set(t, s, "p", "a", "1")
	usage(t, s, "p", store.BlockSize)
	usage(t, other, "p", store.BlockSize)
	if err := s.Set(t.Context(), "p", nil, nil); err != nil {
		t.Fatal(err)
	}
	usage(t, s, "p", 2*store.BlockSize) // even an empty entry takes a block
	if err := s.Set(t.Context(), "p", []byte("b"), charged("b", 1)); err != nil {
		t.Fatal(err)
	}
	usage(t, other, "p", 3*store.BlockSize) // 4+1+4091 bytes: one block
	if err := other.Set(t.Context(), "p", []byte("b"), append(charged("b", 1), 0)); err != nil {
		t.Fatal(err)
	}
	usage(t, s, "p", 4*store.BlockSize) // a byte more: two
	if err := s.Set(t.Context(), "p", []byte("b"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	usage(t, other, "p", 3*store.BlockSize) // replaced, not added
	if err := other.Delete(t.Context(), "p", []byte("b")); err != nil {
		t.Fatal(err)
	}
	usage(t, s, "p", 2*store.BlockSize)
	if err := other.Delete(t.Context(), "p", []byte("b")); err != nil {
		t.Fatal(err)
	}
	usage(t, s, "p", 2*store.BlockSize) // an absent key frees nothing
	usage(t, s, "q", 0)                 // per program
	// A refused write charges nothing.
	if err := s.Set(t.Context(), "p", []byte("big"), make([]byte, store.MaxValue+1)); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("value of MaxValue+1: %v", err)
	}
	usage(t, other, "p", 2*store.BlockSize)
}

// megabyte is a key's value whose entry is charged exactly 1 MiB.
func megabyte(key string) []byte { return charged(key, (1<<20)/store.BlockSize) }

// testDataQuota fills a program's data to MaxDataBytes exactly: nothing
// more fits, a write that frees as much as it takes passes, one that takes
// more does not.
func testDataQuota(t *testing.T, open func() store.State) {
	s := open()
	n := store.MaxDataBytes / (1 << 20)
	key := func(i int) string { return fmt.Sprintf("v%02d", i) }
	for i := range n {
		if err := s.Set(t.Context(), "p", []byte(key(i)), megabyte(key(i))); err != nil {
			t.Fatalf("value %d of %d: %v", i, n, err)
		}
	}
	usage(t, s, "p", store.MaxDataBytes)
	err := s.Set(t.Context(), "p", []byte("one more"), nil)
	if !errors.Is(err, store.ErrQuota) {
		t.Fatalf("a new key past the quota: %v, want ErrQuota", err)
	}
	noPath(t, err)
	// Replacing a value counts the new size, not both.
	if err := s.Set(t.Context(), "p", []byte(key(0)), megabyte(key(0))); err != nil {
		t.Fatalf("replacing a value with one as large: %v", err)
	}
	if err := s.Set(t.Context(), "p", []byte(key(1)), append(megabyte(key(1)), 0)); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("replacing a value with one a byte larger: %v, want ErrQuota", err)
	}
	if v, _, _ := s.Get(t.Context(), "p", []byte(key(1))); len(v) != len(megabyte(key(1))) {
		t.Fatalf("a refused Set changed the value: %d bytes", len(v))
	}
	usage(t, s, "p", store.MaxDataBytes)
	// Shrinking makes room, and so does a delete.
	if err := s.Set(t.Context(), "p", []byte(key(2)), []byte("small")); err != nil {
		t.Fatalf("shrinking a value: %v", err)
	}
	usage(t, s, "p", store.MaxDataBytes-(1<<20)+store.BlockSize)
	if err := s.Set(t.Context(), "p", []byte("one more"), charged("one more", (1<<20)/store.BlockSize-1)); err != nil {
		t.Fatalf("a key in the room made: %v", err)
	}
	if err := s.Set(t.Context(), "p", []byte("two more"), nil); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("past the quota again: %v, want ErrQuota", err)
	}
	if err := s.Delete(t.Context(), "p", []byte(key(3))); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(t.Context(), "p", []byte("two more"), megabyte("two more")); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	usage(t, open(), "p", store.MaxDataBytes)
	// Other programs have quotas of their own.
	set(t, s, "q", "k", "v")
}

// testDataBlocks: small entries are charged a block each against the
// quota, not their bytes.
func testDataBlocks(t *testing.T, open func() store.State) {
	s := open()
	const room = 20 // blocks left once the large entries are in
	left := store.MaxDataBytes / store.BlockSize
	for i := 0; left > room; i++ {
		k := fmt.Sprintf("big%d", i)
		blocks := min(left-room, store.MaxValue/store.BlockSize)
		if err := s.Set(t.Context(), "p", []byte(k), charged(k, blocks)); err != nil {
			t.Fatalf("%s of %d blocks: %v", k, blocks, err)
		}
		left -= blocks
	}
	usage(t, s, "p", store.MaxDataBytes-room*store.BlockSize)
	for i := range room {
		if err := s.Set(t.Context(), "p", []byte{byte(i)}, []byte{byte(i)}); err != nil {
			t.Fatalf("small entry %d of %d: %v", i+1, room, err)
		}
	}
	err := s.Set(t.Context(), "p", []byte("one more"), nil)
	if !errors.Is(err, store.ErrQuota) {
		t.Fatalf("small entry %d: %v, want ErrQuota", room+1, err)
	}
	usage(t, open(), "p", store.MaxDataBytes)
}

// fill adds n entries of a block each to program's data, through the
// handles' Filler when the first has one, or else through Sets from
// several goroutines.
func fill(t *testing.T, handles []store.State, program string, n int) {
	t.Helper()
	if f, ok := handles[0].(Filler); ok {
		if err := f.Fill(program, n); err != nil {
			t.Fatalf("Fill: %v", err)
		}
		return
	}
	const writers = 16
	var wg sync.WaitGroup
	for w := range writers {
		s := handles[w%len(handles)]
		wg.Go(func() {
			for i := w; i < n; i += writers {
				if err := s.Set(t.Context(), program, fmt.Appendf(nil, "fill-%d", i), nil); err != nil {
					t.Errorf("filling, entry %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// testMaxKeys: MaxKeys entries fit, and no more; MaxKeys is as many entries
// as the quota holds of a block each, so both bounds are met at once.
func testMaxKeys(t *testing.T, open func() store.State) {
	s := open()
	fill(t, []store.State{s}, "p", store.MaxKeys-1)
	usage(t, s, "p", (store.MaxKeys-1)*store.BlockSize)
	set(t, s, "p", "last", "v")
	err := s.Set(t.Context(), "p", []byte("one more"), []byte("v"))
	if !errors.Is(err, store.ErrQuota) {
		t.Fatalf("key %d: %v, want ErrQuota", store.MaxKeys+1, err)
	}
	noPath(t, err)
	// Replacing a key adds no key; deleting one makes room for another.
	set(t, s, "p", "last", "w")
	other := open()
	if err := other.Delete(t.Context(), "p", []byte("last")); err != nil {
		t.Fatal(err)
	}
	set(t, s, "p", "one more", "v")
	usage(t, other, "p", store.MaxKeys*store.BlockSize)
	if err := other.Set(t.Context(), "p", []byte("last"), nil); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("key %d through another handle: %v, want ErrQuota", store.MaxKeys+1, err)
	}
}

// testDataOverQuota: data over the quota (written before it counted blocks)
// takes no new key and grows no value, but shrinks in place: a write that
// takes no more than it frees passes.
func testDataOverQuota(t *testing.T, open func() store.State) {
	s := open()
	f, ok := s.(Filler)
	if !ok {
		t.Skip("no Filler: through Set, no data passes its quota")
	}
	if err := s.Set(t.Context(), "p", []byte("mine"), charged("mine", 2)); err != nil {
		t.Fatal(err)
	}
	if err := f.Fill("p", store.MaxKeys+10); err != nil {
		t.Fatal(err)
	}
	over := int64(store.MaxKeys+10+2) * store.BlockSize
	for _, h := range []store.State{s, open()} { // counted before, and anew
		usage(t, h, "p", over)
		if err := h.Set(t.Context(), "p", []byte("new"), nil); !errors.Is(err, store.ErrQuota) {
			t.Fatalf("a new key: %v, want ErrQuota", err)
		}
		if err := h.Set(t.Context(), "p", []byte("mine"), charged("mine", 3)); !errors.Is(err, store.ErrQuota) {
			t.Fatalf("a larger value: %v, want ErrQuota", err)
		}
		if err := h.Set(t.Context(), "p", []byte("mine"), charged("mine", 2)); err != nil {
			t.Fatalf("a value as large: %v", err)
		}
	}
	if err := s.Set(t.Context(), "p", []byte("mine"), []byte("v")); err != nil {
		t.Fatalf("a smaller value: %v", err)
	}
	usage(t, s, "p", over-store.BlockSize)
	if err := s.Delete(t.Context(), "p", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(t.Context(), "p", []byte("mine"), nil); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("a new key, still over: %v, want ErrQuota", err)
	}
}

// testDataTwoHandles: what one handle writes or removes, another's count of
// the program's data follows, even when it counted before.
func testDataTwoHandles(t *testing.T, open func() store.State) {
	a, b := open(), open()
	// b counts the data while it is small...
	set(t, b, "p", "small", "v")
	usage(t, b, "p", store.BlockSize)
	// ...then a fills it...
	n := 0
	for ; ; n++ {
		k := fmt.Sprintf("v%02d", n)
		err := a.Set(t.Context(), "p", []byte(k), megabyte(k))
		if errors.Is(err, store.ErrQuota) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := store.MaxDataBytes/(1<<20) - 1; n != want {
		t.Fatalf("a set %d values of 1 MiB beside one small one, want %d", n, want)
	}
	// ...and b sees it full.
	if err := b.Set(t.Context(), "p", []byte("more"), megabyte("more")); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("b past a's writes: %v, want ErrQuota", err)
	}
	usage(t, b, "p", store.MaxDataBytes-(1<<20)+store.BlockSize)
	// a's delete makes room for b, and b's writes take it from a: 255
	// blocks were left, and the delete freed 256.
	if err := a.Delete(t.Context(), "p", []byte("v00")); err != nil {
		t.Fatal(err)
	}
	if err := b.Set(t.Context(), "p", []byte("more"), megabyte("more")); err != nil {
		t.Fatalf("b after a's delete: %v", err)
	}
	if err := b.Set(t.Context(), "p", []byte("more still"), charged("more still", 255)); err != nil {
		t.Fatalf("b after a's delete: %v", err)
	}
	usage(t, a, "p", store.MaxDataBytes)
	if err := a.Set(t.Context(), "p", []byte("v00"), nil); !errors.Is(err, store.ErrQuota) {
		t.Fatalf("a past b's writes: %v, want ErrQuota", err)
	}
	// Removed by b, the data is empty to a.
	deploy(t, b, store.Deployment{Name: "p", Digest: putImage(t, b, "one")})
	if err := b.Remove("p", false); err != nil {
		t.Fatal(err)
	}
	usage(t, a, "p", 0)
	for _, k := range []string{"v00", "v01"} {
		if err := a.Set(t.Context(), "p", []byte(k), megabyte(k)); err != nil {
			t.Fatalf("a after b removed the data: %v", err)
		}
	}
	usage(t, a, "p", 2<<20)
	usage(t, b, "p", 2<<20)
}

// racingSets has 16 goroutines, started at once, each set keysEach new keys
// of program through the handles in turn; it returns how many succeeded.
func racingSets(t *testing.T, handles []store.State, program string, keysEach int, value func(key []byte) []byte) int {
	t.Helper()
	var wg sync.WaitGroup
	var ok atomic.Int64
	start := make(chan struct{})
	for g := range 16 {
		s := handles[g%len(handles)]
		wg.Go(func() {
			<-start
			for i := range keysEach {
				key := fmt.Appendf(nil, "race-%02d-%d", g, i)
				err := s.Set(t.Context(), program, key, value(key))
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, store.ErrQuota):
					t.Error(err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return int(ok.Load())
}

// Writers racing on one handle, or on several (as processes would), never
// pass the quota or MaxKeys together. Each race is a case of its own, so
// that they run side by side.

func openN(open func() store.State, n int) []store.State {
	var handles []store.State
	for range n {
		handles = append(handles, open())
	}
	return handles
}

// racingBytes: of 16 writers of two values of 1 MiB each, when four such
// values fit, four succeed.
func racingBytes(handles int) func(t *testing.T, open func() store.State) {
	return func(t *testing.T, open func() store.State) {
		const left = 4 // values of 1 MiB that fit once the race starts
		hs := openN(open, handles)
		for i := range store.MaxDataBytes/(1<<20) - left {
			k := fmt.Sprintf("v%02d", i)
			if err := hs[0].Set(t.Context(), "p", []byte(k), megabyte(k)); err != nil {
				t.Fatal(err)
			}
		}
		// Every handle has counted before the race.
		for _, h := range hs {
			usage(t, h, "p", store.MaxDataBytes-left<<20)
		}
		if got := racingSets(t, hs, "p", 2, func(k []byte) []byte { return megabyte(string(k)) }); got != left {
			t.Errorf("%d values of 1 MiB set by racing writers, want %d", got, left)
		}
		usage(t, open(), "p", store.MaxDataBytes)
	}
}

// racingKeys: of 16 writers of two new keys each, when 20 keys fit, 20
// succeed.
func racingKeys(handles int) func(t *testing.T, open func() store.State) {
	return func(t *testing.T, open func() store.State) {
		hs := openN(open, handles)
		fill(t, hs, "p", store.MaxKeys-20)
		for _, h := range hs {
			usage(t, h, "p", (store.MaxKeys-20)*store.BlockSize)
		}
		if got := racingSets(t, hs, "p", 2, func([]byte) []byte { return []byte("v") }); got != 20 {
			t.Errorf("%d keys set by racing writers, want 20", got)
		}
		usage(t, open(), "p", store.MaxKeys*store.BlockSize)
	}
}

// testRemoveRacingSets: a Remove that races a program's first Sets on
// another handle leaves the program charged for exactly the data it still
// holds: every key the writer set either went with the Remove or is there
// and counted. Many programs race at once, since one race seldom lands in
// the gap (a Remove between the check of the usage and the data it deletes).
func testRemoveRacingSets(t *testing.T, open func() store.State) {
	remover, writer := open(), open()
	digest := putImage(t, remover, "one")
	const programs, keys = 1500, 2
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range programs {
		program := fmt.Sprintf("race-%d", i)
		deploy(t, remover, store.Deployment{Name: program, Digest: digest})
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			start := make(chan struct{})
			var race sync.WaitGroup
			race.Go(func() {
				<-start
				if err := remover.Remove(program, false); err != nil {
					t.Errorf("Remove(%s): %v", program, err)
				}
			})
			race.Go(func() {
				<-start
				for k := range keys {
					if err := writer.Set(t.Context(), program, fmt.Appendf(nil, "k%d", k), []byte("v")); err != nil {
						t.Errorf("Set(%s) racing Remove: %v", program, err)
					}
				}
			})
			close(start)
			race.Wait()
		})
	}
	wg.Wait()
	check := open()
	wrong := 0
	for i := range programs {
		program := fmt.Sprintf("race-%d", i)
		held := 0
		for k := range keys {
			if _, ok, err := check.Get(t.Context(), program, fmt.Appendf(nil, "k%d", k)); err != nil {
				t.Fatal(err)
			} else if ok {
				held++
			}
		}
		n, err := check.DataUsage(program)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(held) * store.BlockSize; n != want {
			wrong++
			if wrong <= 5 {
				t.Errorf("%s holds %d keys (%d bytes charged) but DataUsage = %d", program, held, want, n)
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d programs charged for other data than they hold", wrong, programs)
	}
}

// Holder is how the suite makes a program's data busy, as another writer
// does: another process's lock on it, a transaction of another replica
// holding its row. A backend's test offers it by returning, from open, a
// State that also implements Holder; without it the suite skips the waits.
type Holder interface {
	// Hold makes writers of program's data wait until release is called.
	Hold(program string) (release func(), err error)
}

// dataWait bounds what a Set or Delete may run past its context's deadline
// while the data is held: far over what giving up a wait takes, so that a
// loaded 2-core CI does not fail it by chance, and far under what the
// backends waited before a wait took a context (a PostgreSQL round trip's
// timeout, 5 s; a lock file, for ever).
const dataWait = 2 * time.Second

// testDataContext: Get, Set and Delete take the call's context. One already
// done does nothing and says so (its error wraps ctx.Err(), not
// ErrUnavailable: the state is not at fault); one whose deadline passes
// while another writer holds the data gives up its wait then, with
// context.DeadlineExceeded, and its write is not made later either. A read
// does not wait for writers.
func testDataContext(t *testing.T, open func() store.State) {
	s := open()
	set(t, s, "p", "k", "before")
	done, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrQuota) {
			t.Errorf("%s = %v, want an error wrapping %v (and not ErrUnavailable)", what, err, want)
		}
	}
	_, _, err := s.Get(done, "p", []byte("k"))
	check("Get with a canceled context", err, context.Canceled)
	check("Set with a canceled context", s.Set(done, "p", []byte("k"), []byte("canceled")), context.Canceled)
	check("Delete with a canceled context", s.Delete(done, "p", []byte("k")), context.Canceled)
	check("Set of a new key with a canceled context", s.Set(done, "p", []byte("new"), []byte("v")), context.Canceled)
	if v, ok, err := open().Get(t.Context(), "p", []byte("k")); !ok || err != nil || string(v) != "before" {
		t.Fatalf("Get after the canceled calls = %q, %v, %v; want what was set before", v, ok, err)
	}
	usage(t, s, "p", store.BlockSize)

	h, ok := s.(Holder)
	if !ok {
		t.Skip("no Holder: no writer can be made to wait")
	}
	release, err := h.Hold("p")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { release() }()
	const deadline = 200 * time.Millisecond
	for _, c := range []struct {
		what string
		op   func(ctx context.Context) error
	}{
		{"Set", func(ctx context.Context) error { return s.Set(ctx, "p", []byte("k"), []byte("held")) }},
		{"Set of a new key", func(ctx context.Context) error { return s.Set(ctx, "p", []byte("new"), []byte("held")) }},
		{"Delete", func(ctx context.Context) error { return s.Delete(ctx, "p", []byte("k")) }},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		began := time.Now()
		err := c.op(ctx)
		past := time.Since(began) - deadline
		cancel()
		check(c.what+" of held data", err, context.DeadlineExceeded)
		if past > dataWait {
			t.Errorf("%s of held data ran %v past its deadline of %v", c.what, past.Round(time.Millisecond), deadline)
		}
	}
	// Reads go on while writers wait, on this handle and on another.
	for _, r := range []store.State{s, open()} {
		if v, ok, err := r.Get(t.Context(), "p", []byte("k")); !ok || err != nil || string(v) != "before" {
			t.Errorf("Get of held data = %q, %v, %v; want what was set before", v, ok, err)
		}
	}
	release()
	release = func() {}
	// What gave up is not written once the data is let go: the next write
	// takes its turn after anything still queued, and sees none of it.
	set(t, s, "p", "after", "v")
	for key, want := range map[string]string{"k": "before", "new": "", "after": "v"} {
		v, ok, err := open().Get(t.Context(), "p", []byte(key))
		if err != nil || ok != (want != "") || string(v) != want {
			t.Errorf("Get(%s) once the data is let go = %q, %v, %v; want %q", key, v, ok, err, want)
		}
	}
	usage(t, open(), "p", 2*store.BlockSize)
}
