package uverbs

import (
	"testing"

	"github.com/goverbs/goverbs/abi"
)

// FuzzDecodeEvent feeds arbitrary async event descriptors (what read()
// returns on the async fd) to the decoder: it must not panic, must resolve
// only objects the context knows, and port events must carry the port.
func FuzzDecodeEvent(f *testing.F) {
	f.Add(uint64(1), uint32(EventPortActive))
	f.Add(uint64(1)<<32, uint32(EventCQErr)) // the first CQ's tag (slot 0, generation 1)
	f.Add(uint64(7), uint32(EventQPFatal))
	f.Add(uint64(1<<63), uint32(999))
	f.Fuzz(func(t *testing.T, element uint64, typ uint32) {
		c := &Context{}
		known := &CQ{}
		known.tag = add(&c.cqs, known)
		ev := c.decodeEvent(abi.IbUverbsAsyncEventDesc{Element: element, EventType: typ})
		if ev.Type != EventType(typ) || ev.Element != element {
			t.Fatalf("decoded %+v from element %d type %d", ev, element, typ)
		}
		if ev.CQ != nil && (element != known.tag || ev.CQ != known) {
			t.Fatalf("resolved an unknown CQ: %+v", ev)
		}
		if ev.QP != nil || ev.SRQ != nil {
			t.Fatalf("resolved an object that does not exist: %+v", ev)
		}
		switch ev.Type {
		case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange, EventSMChange, EventClientReregister, EventGIDChange:
			if ev.Port != int(element) {
				t.Fatalf("port event without its port: %+v", ev)
			}
		}
		_ = ev.Type.String()
	})
}
