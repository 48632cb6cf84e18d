package abi

import (
	"encoding/binary"
	"fmt"
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
}

// Extended reports whether c is an extended command.
func (c *Command) Extended() bool { return c.Num&cmdFlagExtended != 0 }

// Invoke sends c with the file's transport rule: by ioctl
// (DEVICE/INVOKE_WRITE) when the kernel has it, else by write(). It makes
// exactly one syscall, plus one more only the first time a kernel without
// ioctl says so, and returns the transport that carried the command.
func (f *File) Invoke(c *Command) (Transport, error) {
	if f.ioctlAllowed(objectDevice, methodInvokeWrite) {
		b := NewIoctl(objectDevice, methodInvokeWrite)
		b.PtrIn(attrWriteCoreIn, c.In)
		if len(c.Out) > 0 {
			b.PtrOut(attrWriteCoreOut, c.Out)
		}
		b.Uint64In(attrWriteCmd, uint64(c.Num))
		b.UHW(c.DriverIn, c.DriverOut)
		err := f.Ioctl(b)
		if !IsNoIoctl(err) {
			return TransportIoctl, err
		}
		if f.Policy() == PolicyIoctl {
			return TransportIoctl, err
		}
	}
	return TransportWrite, f.write(c)
}

// write frames c for write() (ib_uverbs_write in the kernel's uverbs_main.c).
func (f *File) write(c *Command) error {
	ne := binary.NativeEndian
	resp := kernelBuf(len(c.Out) + len(c.DriverOut))
	var buf []byte
	if c.Extended() {
		if len(c.In)%8 != 0 || len(c.Out)%8 != 0 || len(c.DriverIn)%8 != 0 || len(c.DriverOut)%8 != 0 {
			return fmt.Errorf("abi: extended command %#x: lengths must be multiples of 8", c.Num)
		}
		buf = kernelBuf(legacyCmdHdrSize + extendedCmdHdrSize + len(c.In) + len(c.DriverIn))
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
		buf = kernelBuf(n)
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
