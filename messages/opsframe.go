package messages

// MarshalEnvelope encodes e as Marshal does, but for a frame of ops,
// which it writes by hand: the envelope's two fields, then each op's
// encoding appended in place (Op.appendCBOR), with the vote claimants
// short when e.ShortIDs. Through the codec, an ops frame cost its
// reflection over the envelope and a copy of every op's encoding, a
// third of the frame's encoding in the fifty-process burst's profiles;
// and a live push had to copy every op to mark it short.
//
// Any other frame, or one whose fields the codec would write otherwise
// (a body beside the ops, a nil op), goes through Marshal; ShortIDs is
// then not honoured, which only costs bytes: whole ids always decode.
func MarshalEnvelope(e *Envelope) ([]byte, error) {
	if !e.opsOnly() {
		return Marshal(e)
	}
	size := 16
	for _, o := range e.Ops {
		if o == nil {
			return Marshal(e)
		}
		size += o.sizeHint()
	}
	b := make([]byte, 0, size)
	b = append(b, 0xa2, 1) // {1: kind, 6: ops}, keys in the codec's order
	b = appendText(b, e.Kind)
	b = appendHead(append(b, 6), 4, uint64(len(e.Ops)))
	for _, o := range e.Ops {
		b = o.appendCBOR(b, e.ShortIDs)
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
