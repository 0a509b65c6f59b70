package sim

import (
	"time"

	"github.com/conclave-agent/conclave/protocols"
)

type eventKind uint8

const (
	evDeliver  eventKind = iota // msg arrives at node
	evTick                      // node's tick timer fires
	evFault                     // schedule action arg fires
	evUndo                      // the fault of action arg ends
	evHeal                      // end of the fault phase
	evDeadline                  // liveness deadline
	evStop                      // end of a run without liveness check
	evSettled                   // end of the quiet after liveness (Checks.Settle)
)

// event is one entry of the run's queue. Events are ordered by (at, seq):
// seq is assigned at push time, so equal times keep their push order.
type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	node int32
	// inc is the incarnation of node the event was meant for (deliver,
	// tick), or the generation of the fault it undoes (undo).
	inc uint32
	arg int32 // action index (fault, undo)
	msg protocols.Message
}

func (e *event) less(f *event) bool {
	if e.at != f.at {
		return e.at < f.at
	}
	return e.seq < f.seq
}

// queue is a binary min-heap of events by value: no interface boxing and no
// allocation once it has grown.
type queue struct {
	ev  []event
	seq uint64
}

func (q *queue) len() int { return len(q.ev) }

func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.ev = append(q.ev, e)
	i := len(q.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.ev[i].less(&q.ev[p]) {
			break
		}
		q.ev[i], q.ev[p] = q.ev[p], q.ev[i]
		i = p
	}
}

func (q *queue) pop() event {
	top := q.ev[0]
	n := len(q.ev) - 1
	q.ev[0] = q.ev[n]
	q.ev = q.ev[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.ev[r].less(&q.ev[l]) {
			m = r
		}
		if !q.ev[m].less(&q.ev[i]) {
			break
		}
		q.ev[i], q.ev[m] = q.ev[m], q.ev[i]
		i = m
	}
	return top
}
