package uverbs

import (
	"errors"
	"sync"
	"testing"
)

// add stores an object as MRs and channels are stored: insert, which
// writes the tag before the table shows the object. (TestRegistryTags'
// first object goes in as CQs, QPs and SRQs do: reserve, then set.)
func add[T any](r *registry[T], v *T) uint64 {
	var tag uint64
	r.insert(v, &tag)
	return tag
}

func TestRegistryTags(t *testing.T) {
	var r registry[int]
	a, b := new(int), new(int)
	ta := r.reserve()
	if ta == 0 {
		t.Fatal("a tag of 0")
	}
	if v := r.load(ta); v != nil {
		t.Fatalf("a reserved slot not yet set loads %p", v)
	}
	r.set(ta, a)
	tb := add(&r, b)
	if r.load(ta) != a || r.load(tb) != b {
		t.Fatalf("load(%#x), load(%#x) = %p, %p; want %p, %p", ta, tb, r.load(ta), r.load(tb), a, b)
	}
	r.remove(ta)
	if v := r.load(ta); v != nil {
		t.Fatalf("a removed tag loads %p", v)
	}
	// The slot is reused, under a new generation: the old tag (an event
	// in flight for the destroyed object) must not find the new object.
	c := new(int)
	tc := add(&r, c)
	if uint32(tc) != uint32(ta) {
		t.Fatalf("slot %d not reused (got %d)", uint32(ta), uint32(tc))
	}
	if tc == ta {
		t.Fatalf("reused slot kept its tag %#x", ta)
	}
	if v := r.load(ta); v != nil {
		t.Fatalf("a stale tag loads %p", v)
	}
	r.remove(ta) // stale: must leave c in place
	r.set(ta, a) // stale: likewise
	if r.load(tc) != c {
		t.Fatal("a stale tag's remove or set changed the slot's new object")
	}
	for _, bad := range []uint64{0, 1 << 40, uint64(99), tb + 1<<32} {
		if v := r.load(bad); v != nil {
			t.Fatalf("load(%#x) = %p, want nil", bad, v)
		}
	}
	if got := r.list(); len(got) != 2 {
		t.Fatalf("list = %d objects, want 2", len(got))
	}
	r.reserve() // reserved and never set: not listed, but drained
	got := r.drain()
	if len(got) != 2 || !(got[0] == c && got[1] == b || got[0] == b && got[1] == c) {
		t.Fatalf("drain = %v, want b and c", got)
	}
	if r.load(tb) != nil || r.load(tc) != nil || len(r.list()) != 0 || len(r.drain()) != 0 {
		t.Fatal("objects left after drain")
	}
	r.remove(tb) // after drain: ignored, and no slot freed twice
	if n := len(r.free); n != len(r.slots) {
		t.Fatalf("%d free slots of %d after drain and a late remove", n, len(r.slots))
	}
}

// TestRegistryAbandon: a create's deferred abandon keeps the slot when
// the create succeeded and frees it when it failed.
func TestRegistryAbandon(t *testing.T) {
	var r registry[int]
	var err error
	kept := r.reserve()
	r.abandon(kept, &err)
	err = errors.New("create failed")
	lost := r.reserve()
	r.abandon(lost, &err)
	if len(r.free) != 1 || r.free[0] != uint32(lost) {
		t.Fatalf("free slots %v after abandoning %#x, want just its slot", r.free, lost)
	}
	v := new(int)
	r.set(kept, v)
	if r.load(kept) != v || r.load(lost) != nil {
		t.Fatal("the kept slot lost its object, or the abandoned one still answers")
	}
}

// TestRegistryConcurrent adds, loads and removes from several goroutines
// (run with -race): every object finds itself by its tag until removed.
func TestRegistryConcurrent(t *testing.T) {
	var r registry[int]
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				v := new(int)
				tag := add(&r, v)
				if r.load(tag) != v {
					t.Errorf("tag %#x lost its object", tag)
					return
				}
				r.remove(tag)
				if r.load(tag) != nil {
					t.Errorf("tag %#x still loads after remove", tag)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(r.list()) != 0 {
		t.Fatal("objects left")
	}
	if len(r.slots) > 8 {
		t.Fatalf("%d slots for 8 goroutines holding one object each: slots are not reused", len(r.slots))
	}
}
