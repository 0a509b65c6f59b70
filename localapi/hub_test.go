package localapi

import (
	"errors"
	"sync"
	"testing"

	"github.com/conclave-agent/conclave/api"
)

func recv(t *testing.T, w *Subscription) api.Status {
	t.Helper()
	select {
	case s, ok := <-w.C():
		if !ok {
			t.Fatalf("subscription closed: %v", w.Err())
		}
		return s
	default:
		t.Fatal("nothing buffered")
		return api.Status{}
	}
}

func TestHubSnapshotThenChanges(t *testing.T) {
	h := NewHub(4)
	defer h.Close()
	early := h.Subscribe() // before any status: nothing to snapshot
	defer early.Close()
	h.Publish(statusEpoch(1))
	w := h.Subscribe()
	defer w.Close()
	h.Publish(statusEpoch(2))
	h.Publish(statusEpoch(2)) // not a change
	h.Publish(statusEpoch(3))
	for _, want := range []uint64{1, 2, 3} {
		if got := recv(t, w).Epoch; got != want {
			t.Fatalf("late subscriber got epoch %d, want %d", got, want)
		}
		if got := recv(t, early).Epoch; got != want {
			t.Fatalf("early subscriber got epoch %d, want %d", got, want)
		}
	}
	if len(w.C()) != 0 {
		t.Errorf("duplicate status was delivered")
	}
	if cur, ok := h.Current(); !ok || cur.Epoch != 3 {
		t.Errorf("Current = %+v, %v", cur, ok)
	}
}

func TestHubLaggingWatcherClosedPublisherNeverBlocks(t *testing.T) {
	h := NewHub(2)
	defer h.Close()
	h.Publish(statusEpoch(1))
	slow := h.Subscribe()
	defer slow.Close()
	fast := h.Subscribe()
	defer fast.Close()
	recv(t, fast)
	for e := uint64(2); e <= 10; e++ {
		h.Publish(statusEpoch(e)) // would deadlock here if Publish blocked
		recv(t, fast)
	}
	// slow read nothing: it holds the snapshot and 2 changes, then was
	// closed.
	var got []uint64
	for s := range slow.C() {
		got = append(got, s.Epoch)
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("slow watcher received %v, want the snapshot and the first 2 changes", got)
	}
	if !errors.Is(slow.Err(), ErrLagged) {
		t.Errorf("slow.Err() = %v, want ErrLagged", slow.Err())
	}
	if fast.Err() != nil || h.Watchers() != 1 {
		t.Errorf("fast watcher affected: err %v, watchers %d", fast.Err(), h.Watchers())
	}
}

func TestHubClose(t *testing.T) {
	h := NewHub(0)
	h.Publish(statusEpoch(1))
	w := h.Subscribe()
	changed, closed := h.wakeup(api.DefaultElection)
	if closed {
		t.Fatal("open hub reports closed")
	}
	h.Close()
	select {
	case <-changed:
	default:
		t.Error("Close did not wake blocking queries")
	}
	if _, closed := h.wakeup(api.DefaultElection); !closed {
		t.Error("closed hub reports open")
	}
	recv(t, w) // the snapshot is still delivered
	if _, ok := <-w.C(); ok {
		t.Error("subscription open after Close")
	}
	if !errors.Is(w.Err(), ErrHubClosed) {
		t.Errorf("Err = %v", w.Err())
	}
	w.Close() // idempotent after the hub closed it
	late := h.Subscribe()
	if _, ok := <-late.C(); ok || !errors.Is(late.Err(), ErrHubClosed) {
		t.Errorf("subscribe after Close: err %v", late.Err())
	}
	h.Publish(statusEpoch(2)) // no panic, no effect
	if cur, _ := h.Current(); cur.Epoch != 1 {
		t.Errorf("Publish after Close changed Current to %d", cur.Epoch)
	}
}

func TestSubscriptionCloseUnregisters(t *testing.T) {
	h := NewHub(1)
	defer h.Close()
	w := h.Subscribe()
	w.Close()
	w.Close()
	if h.Watchers() != 0 || w.Err() != nil {
		t.Errorf("watchers %d, err %v", h.Watchers(), w.Err())
	}
	for e := uint64(1); e < 5; e++ {
		h.Publish(statusEpoch(e)) // must not send on the closed channel
	}
}

// Subscribers racing a publisher must each see an unbroken sequence from
// their snapshot on: a snapshot taken outside the registration lock would
// let an epoch slip between the two and show up as a gap.
func TestHubSnapshotAtomicUnderConcurrency(t *testing.T) {
	const n = 2000
	h := NewHub(n + 1)
	defer h.Close()
	h.Publish(statusEpoch(1))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	start := make(chan struct{})
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			w := h.Subscribe()
			defer w.Close()
			prev := uint64(0)
			for s := range w.C() {
				if prev != 0 && s.Epoch != prev+1 {
					errs <- errors.New("gap or reordering in watch sequence")
					return
				}
				prev = s.Epoch
				if s.Epoch == n {
					return
				}
			}
			errs <- w.Err()
		}()
	}
	close(start)
	for e := uint64(2); e <= n; e++ {
		h.Publish(statusEpoch(e))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
