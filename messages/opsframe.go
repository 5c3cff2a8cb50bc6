package messages

import "slices"

// MarshalEnvelope encodes e as Marshal does, but for a frame of ops,
// which it writes by hand: the envelope's two fields, then each op's
// encoding appended in place (Op.appendCBOR), with the vote claimants
// short when e.ShortIDs. Through the codec, an ops frame cost its
// reflection over the envelope and a copy of every op's encoding, a
// third of the frame's encoding in the fifty-process burst's profiles;
// and a live push had to copy every op to mark it short.
//
// An overlay frame of heartbeats and ids is written by hand too
// (overlayframe.go). Any other frame, or one whose fields the codec
// would write otherwise (a body beside the ops, a nil op), goes through
// Marshal; ShortIDs is then not honoured, which only costs bytes: whole
// ids always decode.
func MarshalEnvelope(e *Envelope) ([]byte, error) { return AppendEnvelope(nil, e) }

// AppendEnvelope appends MarshalEnvelope's encoding of e to dst, so a
// frame's header and payload can share one buffer.
func AppendEnvelope(dst []byte, e *Envelope) ([]byte, error) {
	if e.overlayOnly() {
		o := e.Overlay
		return appendOverlayFrame(slices.Grow(dst, 32+len(o.Heartbeats)*112+len(o.IDs)*20+len(o.Digest)), e), nil
	}
	if !e.opsOnly() || slices.Contains(e.Ops, nil) {
		b, err := Marshal(e)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
	size := 16
	for _, o := range e.Ops {
		size += o.sizeHint()
	}
	b := slices.Grow(dst, size)
	b = append(b, 0xa2, 1) // {1: kind, 6: ops}, keys in the codec's order
	b = appendText(b, e.Kind)
	b = appendHead(append(b, 6), 4, uint64(len(e.Ops)))
	form := formPacked
	if e.ShortIDs {
		form = formShort
	}
	for _, o := range e.Ops {
		b = o.appendCBOR(b, form)
	}
	return b, nil
}

// opsOnly says whether e is an ops frame with no other body: the codec
// would write exactly its kind and its ops.
func (e *Envelope) opsOnly() bool {
	return e.Kind == KindOps && len(e.Ops) > 0 &&
		e.Hello == nil && e.Accept == nil && e.Refuse == nil && e.VV.IsZero() && len(e.Peers) == 0 &&
		e.Ping == nil && e.Tunnels == nil && e.reachBodies() == 0 && e.overlayBodies() == 0
}

// UnmarshalEnvelope decodes a frame as Unmarshal does into an Envelope,
// but reads an ops frame in the shape MarshalEnvelope writes ({1: "ops",
// 6: [op, ...]}, nothing else) by hand: the codec's reflection over the
// envelope and its well-formedness pass before it cost more than the
// hand-written decoding of the ops themselves in the fifty-process
// burst's profiles. Each op goes through the same decoder the codec
// calls (Op.UnmarshalCBOR), so what this accepts decodes exactly as the
// codec decodes it; anything else, and an ops frame it cannot read
// whole, goes to the codec, which decodes it or says why not.
func UnmarshalEnvelope(b []byte) (*Envelope, error) { return UnmarshalEnvelopeHeld(b, nil) }

// UnmarshalEnvelopeHeld is UnmarshalEnvelope for a receiver that holds
// some ops already: an op of an ops frame for which held says so comes
// back with its writer, seq and clock only, marked Op.Held (opDecoder.op),
// and the rest of the op is checked for its shape but not its contents.
// A frame whose held ops the codec would refuse for their contents is
// taken: a duplicate is dropped unread either way.
func UnmarshalEnvelopeHeld(b []byte, held func(writer string, seq uint64) bool) (*Envelope, error) {
	if e := unmarshalOpsFrame(b, held); e != nil {
		return e, nil
	}
	if e := unmarshalOverlayFrame(b); e != nil {
		return e, nil
	}
	var e Envelope
	if err := Unmarshal(b, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// opsFramePrefix is an ops frame's head up to its array of ops: a map
// of two, key 1, the text "ops", key 6.
var opsFramePrefix = []byte{0xa2, 1, 0x63, 'o', 'p', 's', 6}

// unmarshalOpsFrame is the frame b if it is an ops frame of the
// canonical shape with at least one op, every op readable, and nothing
// after them; nil otherwise.
func unmarshalOpsFrame(b []byte, held func(writer string, seq uint64) bool) *Envelope {
	if len(b) > MaxDecodeBytes || len(b) <= len(opsFramePrefix) || string(b[:len(opsFramePrefix)]) != string(opsFramePrefix) {
		return nil
	}
	b = b[len(opsFramePrefix):]
	major, n, hl, ok := head(b)
	// Each op takes a byte at least: a count past what is left is a lie,
	// refused before anything is allocated for it.
	if !ok || major != 4 || n == 0 || n > 1<<16 || n > uint64(len(b)-hl) {
		return nil
	}
	d := opDecoder{b: b[hl:], held: held}
	ops := make([]*Op, n)
	for i := range ops {
		// One allocation an op, not one for all: an op the ledger keeps
		// must not hold its frame's duplicates in memory.
		o := new(Op)
		if *o = d.op(); d.err != nil {
			return nil
		}
		ops[i] = o
	}
	if len(d.b) != 0 {
		return nil
	}
	return &Envelope{Kind: KindOps, Ops: ops}
}
