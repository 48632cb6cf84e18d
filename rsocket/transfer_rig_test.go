package rsocket_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/goverbs/goverbs/internal/rigtest"
	"github.com/goverbs/goverbs/rsocket"
)

// TestRigWriteTransfers checks how a Write is cut into transfers on the
// software devices: as few as the peer's target buffers allow (rsocket.c's
// first transfer of 2 KiB, doubling up to 64 KiB, would make 4 KiB two
// transfers, 48 KiB five and 64 KiB + 1 seven), and that the peer reads
// the bytes as written.
func TestRigWriteTransfers(t *testing.T) {
	rigtest.Require(t)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			client, server := pair(t, p, rsocket.Config{})
			// The first five Writes, 57,346 bytes, fit in the peer's
			// first target buffer (half its 128 KiB receive buffer);
			// the sixth fills it to its end. Then 64 KiB + 1: the
			// second target buffer whole (offered once the reader has
			// read the first), then one byte in the first again.
			for _, tc := range []struct{ size, transfers int }{
				{1, 1}, {2048, 1}, {2049, 1}, {4096, 1}, {48 << 10, 1},
				{64<<10 - 57346, 1}, {64<<10 + 1, 2},
			} {
				before := rsocket.Transfers(client)
				want := pattern(tc.size, 3)
				got := make([]byte, tc.size)
				read := make(chan error, 1)
				go func() {
					_, err := io.ReadFull(server, got)
					read <- err
				}()
				if _, err := client.Write(want); err != nil {
					t.Fatalf("write %d: %v", tc.size, err)
				}
				if err := <-read; err != nil {
					t.Fatalf("read %d: %v", tc.size, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("size %d: %s", tc.size, firstDiff(got, want))
				}
				if n := int(rsocket.Transfers(client) - before); n != tc.transfers {
					t.Errorf("Write of %d bytes on %s: %d transfers, want %d", tc.size, p.name, n, tc.transfers)
				}
			}
		})
	}
}
