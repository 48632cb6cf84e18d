package uverbs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/rigtest"
)

// peerChildEnv makes the test binary the peer of TestPeerKilledRig: a
// process of its own, so that killing it tears its QP down the way the
// kernel does for any dying program.
const peerChildEnv = "GOVERBS_PEER_CHILD"

// peerInfo is what the two processes exchange over the child's stdio.
type peerInfo struct {
	Endpoint Endpoint
	Addr     uint64
	RKey     uint32
}

// TestPeerKilledRig: RC RDMA writes from rxeb to a QP on rxea owned by
// another process, which is killed (SIGKILL) mid-transfer. The writes in
// flight then find no QP at the peer (the kernel destroyed it with the
// process) and are retried until the transport gives up: the first WR
// still outstanding completes with WCRetryExcErr, every later one with
// WCWRFlushErr, and the QP is in ERR. Nothing is lost: every WR posted gets
// exactly one completion, success or error, and none comes twice.
func TestPeerKilledRig(t *testing.T) {
	if os.Getenv(peerChildEnv) == "1" {
		peerChild(t)
		return
	}
	e := newEvEnv(t, "rxeb")
	rigtest.Device(t, "rxea")

	child := exec.Command(os.Args[0], "-test.run=^TestPeerKilledRig$", "-test.v")
	child.Env = append(os.Environ(), peerChildEnv+"=1")
	child.Stderr = os.Stderr
	in, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	})
	out := bufio.NewScanner(outPipe)
	var peer peerInfo
	if err := readPeerLine(out, "peer", &peer); err != nil {
		t.Fatalf("child: %v", err)
	}

	cq := e.cq(t, 4096, nil)
	qp := e.rcQP(t, cq, cq, nil, 256, 1)
	local, err := qp.Endpoint(1, 1)
	if err != nil {
		t.Fatalf("Endpoint: %v", err)
	}
	b, _ := json.Marshal(peerInfo{Endpoint: local})
	fmt.Fprintf(in, "%s\n", b)
	var ready struct{ Ready bool }
	if err := readPeerLine(out, "ready", &ready); err != nil || !ready.Ready {
		t.Fatalf("child not ready: %v", err)
	}
	// A short ACK timeout and few retries, so that the give-up comes in
	// well under a second of transport time (4.096 µs·2^12 = 16.8 ms, 2
	// retries), even slowed down by the emulated CPU.
	if err := qp.Connect(local, peer.Endpoint, ConnectOptions{Timeout: 12, RetryCnt: 2}); err != nil {
		t.Fatalf("Connect: %v", err)
	}

	const depth, beforeKill, afterKill = 128, 2000, 300
	seen := map[uint64]int{}
	var statuses []WCStatus // in completion order
	var posted, okBeforeKill uint64
	wc := make([]WorkCompletion, 64)
	poll := func() {
		n, err := cq.Poll(wc)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		for _, w := range wc[:n] {
			seen[w.ID]++
			if seen[w.ID] > 1 {
				t.Errorf("WR %d completed twice", w.ID)
			}
			if w.ID >= posted {
				t.Errorf("completion for WR %d, never posted", w.ID)
			}
			statuses = append(statuses, w.Status)
			if !killed && w.Status == WCSuccess {
				okBeforeKill++
			}
		}
	}
	outstanding := func() uint64 { return posted - uint64(len(statuses)) }
	deadline := time.Now().Add(2 * time.Minute)
	for posted < beforeKill+afterKill {
		if time.Now().After(deadline) {
			t.Fatalf("%d WRs posted, %d completions after 2 minutes", posted, len(statuses))
		}
		if !killed && okBeforeKill >= beforeKill/2 {
			// Mid-transfer: WRs are in flight when the peer dies.
			if err := child.Process.Kill(); err != nil {
				t.Fatalf("kill the peer: %v", err)
			}
			child.Wait()
			killed = true
			t.Logf("peer killed after %d successful writes, %d in flight", okBeforeKill, outstanding())
		}
		if outstanding() >= depth {
			poll()
			continue
		}
		wr := []SendWR{{ID: posted, Opcode: WRRDMAWrite, Flags: SendSignaled, SGL: e.sge(0, 512),
			RemoteAddr: peer.Addr + posted%64*512, RKey: peer.RKey}}
		if n, err := qp.PostSend(wr); n != 1 || err != nil {
			t.Fatalf("PostSend of WR %d: %d, %v", posted, n, err)
		}
		posted++
	}
	for outstanding() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d WRs posted, only %d completions after 2 minutes: WRs lost", posted, len(statuses))
		}
		poll()
	}

	// success*, then one retry-exceeded, then flushes only.
	first := -1
	for i, s := range statuses {
		if s != WCSuccess {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("all %d writes succeeded although the peer was killed", len(statuses))
	}
	if statuses[first] != WCRetryExcErr {
		t.Errorf("first failed completion (#%d) is %v, want %v", first, statuses[first], WCRetryExcErr)
	}
	flushed := 0
	for i, s := range statuses[first+1:] {
		if s != WCWRFlushErr {
			t.Errorf("completion #%d after the retry error is %v, want %v", first+1+i, s, WCWRFlushErr)
		} else {
			flushed++
		}
	}
	if a, _, err := qp.Query(QPAttrState); err != nil || a.State != QPStateErr {
		t.Errorf("QP state after the retry error (QUERY_QP): %v, %v; want %v", a.State, err, QPStateErr)
	}
	t.Logf("%d WRs: %d succeeded, 1 %v, %d flushed", posted, first, statuses[first], flushed)
}

// peerChild is the peer's process: an RC QP on rxea whose memory the parent
// writes. It prints its address, connects to the endpoint it reads, says
// it is ready and waits to be killed.
func peerChild(t *testing.T) {
	e := newEvEnv(t, "rxea")
	mr, err := e.pd.RegMR(e.mem.Bytes(), AccessLocalWrite|AccessRemoteWrite)
	if err != nil {
		t.Fatalf("RegMR: %v", err)
	}
	cq := e.cq(t, 16, nil)
	qp := e.rcQP(t, cq, cq, nil, 1, 1)
	local, err := qp.Endpoint(1, 1)
	if err != nil {
		t.Fatalf("Endpoint: %v", err)
	}
	b, _ := json.Marshal(peerInfo{Endpoint: local, Addr: uint64(e.mem.Addr()), RKey: mr.RKey()})
	fmt.Printf("peer %s\n", b)
	in := bufio.NewScanner(os.Stdin)
	var remote peerInfo
	if err := readPeerLine(in, "", &remote); err != nil {
		t.Fatalf("parent's endpoint: %v", err)
	}
	if err := qp.Connect(local, remote.Endpoint, ConnectOptions{Access: AccessRemoteWrite}); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	fmt.Printf("ready {\"Ready\":true}\n")
	for in.Scan() {
	}
	time.Sleep(time.Hour) // until the parent kills it
}

// readPeerLine reads lines until one that starts with prefix (the test
// framework prints its own lines too) and decodes the JSON after it.
func readPeerLine(s *bufio.Scanner, prefix string, v any) error {
	for s.Scan() {
		line := s.Text()
		if prefix == "" {
			return json.Unmarshal([]byte(line), v)
		}
		if len(line) > len(prefix)+1 && line[:len(prefix)+1] == prefix+" " {
			return json.Unmarshal([]byte(line[len(prefix)+1:]), v)
		}
	}
	if err := s.Err(); err != nil {
		return err
	}
	return fmt.Errorf("no %q line before EOF", prefix)
}
