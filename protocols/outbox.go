package protocols

// Outbox keeps what a protocol owes its driver between two Ready calls —
// queued messages, and the last hard and soft state handed out — and
// implements the HasReady / Ready / Advance part of Protocol for a protocol
// that supplies its current hard and soft state. It never allocates on a
// Ready without a state change.
type Outbox struct {
	msgs          []Message
	persisted     HardState
	announced     SoftState
	announcedOnce bool
}

// Reset starts the outbox of a protocol restored from persisted. When
// initial is non-nil it counts as already announced, so a node that starts
// as a plain follower announces nothing until something changes.
func (o *Outbox) Reset(persisted HardState, initial *SoftState) {
	*o = Outbox{persisted: persisted}
	if initial != nil {
		o.announced, o.announcedOnce = *initial, true
	}
}

// Send queues m for the next Ready.
func (o *Outbox) Send(m Message) { o.msgs = append(o.msgs, m) }

// Pending returns the queued messages (read-only; for tests and callers
// that inspect what is about to leave).
func (o *Outbox) Pending() []Message { return o.msgs }

// HasReady reports whether hs, ss or queued messages make a Ready.
func (o *Outbox) HasReady(hs HardState, ss SoftState) bool {
	return len(o.msgs) > 0 || hs != o.persisted || !o.announcedOnce || ss != o.announced
}

// Ready returns the work owed given the protocol's current hs and ss.
// Its Messages slice is only valid until Advance.
func (o *Outbox) Ready(hs HardState, ss SoftState) Ready {
	rd := Ready{Messages: o.msgs}
	if hs != o.persisted {
		changed := hs // allocated only when there is a change
		rd.HardState = &changed
	}
	if !o.announcedOnce || ss != o.announced {
		changed := ss
		rd.SoftState = &changed
	}
	return rd
}

// Advance records that rd, as returned by Ready, was handled.
func (o *Outbox) Advance(rd Ready) {
	if rd.HardState != nil {
		o.persisted = *rd.HardState
	}
	if rd.SoftState != nil {
		o.announced, o.announcedOnce = *rd.SoftState, true
	}
	if len(rd.Messages) == len(o.msgs) {
		o.msgs = o.msgs[:0] // reuse the buffer: the driver is done with it
	} else {
		o.msgs = append(o.msgs[:0], o.msgs[len(rd.Messages):]...)
	}
}

// Persisted returns the hard state last handed out in a Ready (or restored).
func (o *Outbox) Persisted() HardState { return o.persisted }
