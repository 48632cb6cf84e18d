package abi

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
)

// Command is one write-style uverbs command (IB_USER_VERBS_CMD_* or
// IB_USER_VERBS_EX_CMD_*): a core request and response in the kernel's
// struct layout, and the driver's private data.
type Command struct {
	// Num is the command number; set IB_USER_VERBS_CMD_FLAG_EXTENDED
	// (0x80000000) for extended commands.
	Num uint32
	// In is the core request. A legacy command that has a response (Out
	// not empty) starts with the 8-byte response pointer, which Invoke
	// fills in; commands without one (DEALLOC_PD, MODIFY_QP, …) have no
	// such field, and extended commands carry it in their extended header.
	In []byte
	// Out receives the core response.
	Out []byte
	// DriverIn and DriverOut are the driver's private request and
	// response (udata).
	DriverIn, DriverOut []byte
	// Quick: the kernel answers the command on the CPU from memory it
	// has (Ioctl.Quick's rule); by ioctl it is then a raw syscall. A
	// write() is always an ordinary one (old kernels only).
	Quick bool
}

// Extended reports whether c is an extended command.
func (c *Command) Extended() bool { return c.Num&cmdFlagExtended != 0 }

// Invoke sends c with the file's transport rule: by ioctl
// (DEVICE/INVOKE_WRITE) when the kernel has it, else by write(). It makes
// exactly one syscall, plus one more only the first time a kernel without
// ioctl says so, and returns the transport that carried the command.
func (f *File) Invoke(c *Command) (Transport, error) {
	if f.ioctlAllowed(objectDevice, methodInvokeWrite) {
		if f.quick && f.rule.Load() == 0 {
			if done, err := f.flatInvoke(c); done {
				return TransportIoctl, err
			}
		}
		err := f.invokeIoctl(c)
		if !IsNoIoctl(err) {
			return TransportIoctl, err
		}
		if f.Policy() == PolicyIoctl {
			return TransportIoctl, err
		}
	}
	return TransportWrite, f.write(c)
}

// invokeSlots is the length of an invokeTable: legacy commands in the
// first half, extended ones in the second.
const invokeSlots = 128

// invokeTable holds a file's kept INVOKE_WRITE calls (File.invokes).
type invokeTable [invokeSlots]atomic.Pointer[Kept[invokeShape]]

// invokeTable is f's table of kept calls, made on first use.
func (f *File) invokeTable() *invokeTable {
	if t := f.invokes.Load(); t != nil {
		return t
	}
	f.invokes.CompareAndSwap(nil, new(invokeTable))
	return f.invokes.Load()
}

// invokeIoctl tunnels c through DEVICE/INVOKE_WRITE. The outputs stay in
// the builder and are copied out here, so c's buffers never escape and the
// call allocates nothing. A command goes through the file's prepared call
// for its number (built by the first such command, kept for those of the
// same shape), or, with another shape, through a pooled builder.
func (f *File) invokeIoctl(c *Command) error {
	s := shapeOf(c)
	var b *Ioctl
	var p *Prepared
	slot := c.Num // legacy commands in the first half, extended ones in the second
	if c.Extended() {
		slot = c.Num&^cmdFlagExtended + invokeSlots/2
	}
	if slot < invokeSlots {
		if k := Keep(&f.invokeTable()[slot], s, objectDevice, methodInvokeWrite); k.Shape.same(s) {
			p = k.P
			b = p.Take()
		}
	}
	if b == nil {
		b = NewIoctl(objectDevice, methodInvokeWrite)
		s.Build(b)
	}
	in, out, din, dout := s.attrs()
	b.SetBytes(in, c.In)
	b.SetBytes(din, c.DriverIn)
	// Invoke has asked ioctlAllowed already.
	err := f.ioctl(b)
	if err == nil {
		copy(c.Out, b.Output(out))
		copy(c.DriverOut, b.Output(dout))
	}
	// Given back without a defer (a visible part of every command's cost);
	// nothing above panics short of a runtime fault, and a kept builder
	// left taken would only send later commands the pooled way. p is nil
	// for a pooled builder: Done releases it.
	p.Done(b)
	return err
}

// invokeShape is what INVOKE_WRITE's attributes depend on: the command
// and the lengths of its four parts.
type invokeShape struct {
	num                uint32
	in, out, din, dout int
	quick              bool
}

// same is s == o, field by field: the compiler's == of a struct with
// padding calls a generated function that cost ~130 instructions a
// command (callgrind, the mlx5 model's ModifyQP).
func (s invokeShape) same(o invokeShape) bool {
	return s.num == o.num && s.in == o.in && s.out == o.out && s.din == o.din && s.dout == o.dout && s.quick == o.quick
}

func shapeOf(c *Command) invokeShape {
	return invokeShape{c.Num, len(c.In), len(c.Out), len(c.DriverIn), len(c.DriverOut), c.Quick}
}

// Build adds the attributes, inputs zeroed (the call's are set by SetBytes).
func (s invokeShape) Build(b *Ioctl) {
	b.quick = s.quick
	b.ptrInZero(attrWriteCoreIn, s.in)
	if s.out > 0 {
		b.PtrOutLen(attrWriteCoreOut, s.out)
	}
	b.Uint64In(attrWriteCmd, uint64(s.num))
	if s.din > 0 {
		b.ptrInZero(attrUHWIn, s.din)
	}
	if s.dout > 0 {
		b.PtrOutLen(attrUHWOut, s.dout)
	}
}

// attrs numbers the attributes build added (-1: not added).
func (s invokeShape) attrs() (in, out, din, dout Attr) {
	in, out, din, dout = 0, -1, -1, -1
	n := Attr(1)
	if s.out > 0 {
		out, n = n, n+1
	}
	n++ // the command number
	if s.din > 0 {
		din, n = n, n+1
	}
	if s.dout > 0 {
		dout = n
	}
	return in, out, din, dout
}

// write frames c for write() (ib_uverbs_write in the kernel's uverbs_main.c).
func (f *File) write(c *Command) error {
	ne := binary.NativeEndian
	scratch := getWriteScratch()
	defer putWriteScratch(scratch)
	resp := scratch.take(len(c.Out) + len(c.DriverOut))
	var buf []byte
	if c.Extended() {
		if len(c.In)%8 != 0 || len(c.Out)%8 != 0 || len(c.DriverIn)%8 != 0 || len(c.DriverOut)%8 != 0 {
			return fmt.Errorf("abi: extended command %#x: lengths must be multiples of 8", c.Num)
		}
		buf = scratch.take(legacyCmdHdrSize + extendedCmdHdrSize + len(c.In) + len(c.DriverIn))
		ne.PutUint32(buf[0:], c.Num)
		ne.PutUint16(buf[4:], uint16(len(c.In)/8))
		ne.PutUint16(buf[6:], uint16(len(c.Out)/8))
		ne.PutUint64(buf[8:], addr(resp))
		ne.PutUint16(buf[16:], uint16(len(c.DriverIn)/8))
		ne.PutUint16(buf[18:], uint16(len(c.DriverOut)/8))
		copy(buf[legacyCmdHdrSize+extendedCmdHdrSize:], c.In)
		copy(buf[legacyCmdHdrSize+extendedCmdHdrSize+len(c.In):], c.DriverIn)
	} else {
		if len(c.Out) > 0 && len(c.In) < legacyResponseFieldLen {
			return fmt.Errorf("abi: command %d: request shorter than its response field", c.Num)
		}
		n := legacyCmdHdrSize + len(c.In) + len(c.DriverIn)
		if n%4 != 0 || len(resp)%4 != 0 {
			return fmt.Errorf("abi: command %d: lengths must be multiples of 4", c.Num)
		}
		buf = scratch.take(n)
		ne.PutUint32(buf[0:], c.Num)
		ne.PutUint16(buf[4:], uint16(n/4))
		ne.PutUint16(buf[6:], uint16(len(resp)/4))
		copy(buf[legacyCmdHdrSize:], c.In)
		copy(buf[legacyCmdHdrSize+len(c.In):], c.DriverIn)
		if len(c.Out) > 0 {
			ne.PutUint64(buf[legacyCmdHdrSize:], addr(resp))
		}
	}
	if err := f.Write(buf); err != nil {
		return err
	}
	copy(c.Out, resp)
	copy(c.DriverOut, resp[len(c.Out):])
	return nil
}

// writeScratch is the memory of one write() command: the framed request
// and the response the kernel writes through its pointer. Pooled, so a
// command allocates nothing; kernelBuf memory, so the addresses stay put.
type writeScratch struct{ mem, free []byte }

const writeScratchSize = 2048 // every core command and its driver data fit

var writeScratchPool = sync.Pool{New: func() any { return &writeScratch{mem: kernelBuf(writeScratchSize)} }}

func getWriteScratch() *writeScratch {
	s := writeScratchPool.Get().(*writeScratch)
	s.free = s.mem
	return s
}

func putWriteScratch(s *writeScratch) {
	clear(s.mem[:len(s.mem)-len(s.free)])
	writeScratchPool.Put(s)
}

// take returns n zeroed bytes, 8-byte aligned, from the scratch memory, or
// fresh heap bytes if it is used up.
func (s *writeScratch) take(n int) []byte {
	n8 := (n + 7) &^ 7
	if n8 > len(s.free) {
		return kernelBuf(n)
	}
	p := s.free[:n:n]
	s.free = s.free[n8:]
	return p
}
