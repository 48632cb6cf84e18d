package abi

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/goverbs/goverbs/internal/kernel"
)

func buildPreparedTest(b *Ioctl) {
	b.NewObject(0)
	b.Uint64In(1, 0)
	b.Uint32In(2, 0)
	b.PtrOutLen(3, 4)
}

// TestPreparedReuse makes one prepared call three times: each reaches the
// kernel with its own values and the attribute array as built (no output
// flag or handle left from the call before), reads its own answers, and a
// call whose output the kernel did not write reads none.
func TestPreparedReuse(t *testing.T) {
	call := 0
	k := &fakeKernel{respond: func(s *seenIoctl, buf []byte) {
		call++
		switch call {
		case 1:
			setOutput(buf, 3, []byte{1, 9, 9, 9})
		case 3: // a short answer: the rest must not be call 1's
			setOutput(buf, 3, []byte{3})
		}
		ne.PutUint64(buf[ioctlHdrSize+8:], uint64(100+call)) // new handle in attr 0
	}}
	f := openFake(t, k)
	p := NewPrepared(5, 6, buildPreparedTest)
	for i := 1; i <= 3; i++ {
		b := p.Take()
		b.SetUint64(1, uint64(1000+i))
		b.SetUint64(2, 0x1_0000_0000+uint64(i)) // a 4-byte input keeps the low 32 bits
		if err := f.Ioctl(b); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := b.Result(0); got != uint64(100+i) {
			t.Errorf("call %d: new handle %d, want %d", i, got, 100+i)
		}
		out := b.Output(3)
		if i == 2 && out != nil {
			t.Errorf("call 2: output %v, want none (the kernel wrote none)", out)
		}
		if i == 1 && string(out) != "\x01\x09\x09\x09" {
			t.Errorf("call 1: output %v, want [1 9 9 9]", out)
		}
		if i == 3 && string(out) != "\x03\x00\x00\x00" {
			t.Errorf("call 3: output %v, want [3 0 0 0]", out)
		}
		p.Done(b)
	}
	want := []seenAttr{
		{id: 0, flags: attrFMandatory},
		{id: 1, len: 8, flags: attrFMandatory},
		{id: 2, len: 4, flags: attrFMandatory},
		{id: 3, len: 4, flags: attrFMandatory},
	}
	for i, s := range k.ioctls {
		want[1].data, want[2].data = uint64(1001+i), uint64(1+i)
		got := append([]seenAttr(nil), s.attrs...)
		got[3].data = 0 // an arena address
		if !reflect.DeepEqual(got, want) {
			t.Errorf("call %d reached the kernel with %+v, want %+v", i+1, got, want)
		}
	}
}

// TestPreparedBusy: while one goroutine has the kept builder, Take builds
// another the same way, and Done puts that one back in the pool.
func TestPreparedBusy(t *testing.T) {
	f := openFake(t, &fakeKernel{})
	p := NewPrepared(5, 6, buildPreparedTest)
	a := p.Take()
	b := p.Take()
	if a == b {
		t.Fatal("Take handed out the kept builder twice")
	}
	if a.n != b.n || a.ids != b.ids {
		t.Fatalf("the fresh builder has %d attributes (ids %#x), the kept one %d (%#x)", b.n, b.ids, a.n, a.ids)
	}
	b.SetUint64(1, 7)
	if err := f.Ioctl(b); err != nil {
		t.Fatal(err)
	}
	p.Done(b)
	p.Done(a)
	if c := p.Take(); c != a {
		t.Fatal("after Done, Take did not hand out the kept builder")
	}
}

// TestPreparedRefusesPtrOut: a kept builder must not hold caller memory.
func TestPreparedRefusesPtrOut(t *testing.T) {
	f := openFake(t, &fakeKernel{})
	var dst [4]byte
	p := NewPrepared(5, 6, func(b *Ioctl) { b.PtrOut(1, dst[:]) })
	b := p.Take()
	defer p.Done(b)
	if err := f.Ioctl(b); err == nil || !strings.Contains(err.Error(), "PtrOut") {
		t.Fatalf("Ioctl = %v, want the PtrOut refusal", err)
	}
}

// TestInvokeKeptAndFresh: INVOKE_WRITE calls of one command go through the
// file's kept call while they have its shape, and through a fresh builder
// when they do not; each reaches the kernel with its own bytes and reads
// its own answer.
func TestInvokeKeptAndFresh(t *testing.T) {
	n := 0
	k := &fakeKernel{respond: func(s *seenIoctl, buf []byte) {
		n++
		setOutput(buf, attrWriteCoreOut, []byte{byte(n), 0, 0, 0})
	}}
	f := openFake(t, k)
	big := make([]byte, 24) // in the arena, not inline
	cmds := []*Command{
		{Num: 3, In: []byte{1, 1, 1, 1, 1, 1, 1, 1}, Out: make([]byte, 4), DriverIn: big},
		{Num: 3, In: []byte{2, 2, 2, 2, 2, 2, 2, 2}, Out: make([]byte, 4), DriverIn: []byte{7, 7, 7, 7}}, // another shape
		{Num: 3, In: []byte{3, 3, 3, 3, 3, 3, 3, 3}, Out: make([]byte, 4), DriverIn: append([]byte{5}, big[1:]...)},
	}
	for i, c := range cmds {
		if _, err := f.Invoke(c); err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if c.Out[0] != byte(i+1) {
			t.Errorf("command %d: response %v, want the kernel's answer %d", i, c.Out, i+1)
		}
		var in, din []byte
		for _, a := range k.ioctls[i].attrs {
			switch a.id {
			case attrWriteCoreIn:
				in = ne.AppendUint64(nil, a.data)
			case attrUHWIn:
				din = a.bytes
				if a.len <= 8 {
					din = ne.AppendUint64(nil, a.data)[:a.len]
				}
			}
		}
		if string(in) != string(c.In) || string(din) != string(c.DriverIn) {
			t.Errorf("command %d reached the kernel with in %v, driver in %v; want %v, %v", i, in, din, c.In, c.DriverIn)
		}
	}
	if p := f.invokeTable()[3].Load(); p == nil || p.Shape != shapeOf(cmds[0]) {
		t.Fatalf("the kept call of command 3 is %+v, want the first command's shape", p)
	}
}

// echoKernel answers every ioctl by copying the first attribute's inline
// value into output attribute 2 and marking it valid; it keeps no state,
// so goroutines may share it.
type echoKernel struct{ fakeKernel }

func (*echoKernel) Ioctl(fd int, req uint, arg []byte) error {
	v := arg[ioctlHdrSize+8 : ioctlHdrSize+16] // attribute 0: the input (id 1)
	setOutput(arg, 2, v)
	return nil
}

// TestPreparedConcurrent: goroutines sharing one Prepared each read the
// answer to their own call, whichever builder Take gave them.
func TestPreparedConcurrent(t *testing.T) {
	path := "/fake/" + t.Name()
	t.Cleanup(kernel.RegisterFake(path, func() (int, kernel.Kernel, error) { return 42, &echoKernel{}, nil }))
	f, err := Open(path, 14)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPrepared(5, 6, func(b *Ioctl) {
		b.Quick()
		b.Uint64In(1, 0)
		b.PtrOutLen(2, 8)
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				v := uint64(g)<<32 | uint64(i)
				b := p.Take()
				b.SetUint64(0, v)
				if err := f.Ioctl(b); err != nil {
					errs <- err
					return
				}
				out := b.Output(1)
				if len(out) != 8 || ne.Uint64(out) != v {
					errs <- fmt.Errorf("goroutine %d call %d: answer %v, want %#x", g, i, out, v)
					p.Done(b)
					return
				}
				p.Done(b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
