package messages

// Overlay frames read and written by hand: the heartbeats a node hears
// every second from each neighbour, and the ids announced and grafted in
// a burst, came through the codec's reflection twice over (the envelope,
// then each heartbeat's own wire struct); in an idle fleet's CPU profile
// decoding was 4% of all samples. UnmarshalEnvelope reads an overlay
// frame whose body holds only heartbeats, ids and a digest ({1: kind,
// 40: {2: [...], 3: [...], 4: digest}}, the fields in any order, each at
// most once) by hand, each heartbeat and id with the decoder the codec
// calls on it; anything else goes to the codec. MarshalEnvelope writes
// the same shape by hand, byte for byte what the codec writes.

// unmarshalOverlayFrame is the frame b if it is an overlay frame of the
// shape above, read whole; nil otherwise.
func unmarshalOverlayFrame(b []byte) *Envelope {
	if len(b) > MaxDecodeBytes || len(b) < 2 || b[0] != 0xa2 || b[1] != 1 {
		return nil
	}
	d := opDecoder{b: b[2:]}
	kt := d.item("kind")
	if d.err != nil || kt[0]>>5 != 3 {
		return nil
	}
	_, _, hl, _ := head(kt)
	kind, ok := overlayKinds[string(kt[hl:])]
	if !ok || len(d.b) < 2 || d.b[0] != 0x18 || d.b[1] != 40 {
		return nil
	}
	d.b = d.b[2:]
	o := &Overlay{}
	var seen uint16
	for n := d.head(5, "overlay: not a map"); n > 0 && d.err == nil; n-- {
		switch d.field(&seen, 4) {
		case 2:
			o.Heartbeats = d.heartbeats()
		case 3:
			o.IDs = d.opIDs()
		case 4:
			o.Digest = d.bytes("digest")
		default: // the sample (1): the codec reads it
			return nil
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil
	}
	return &Envelope{Kind: kind, Overlay: o}
}

func (d *opDecoder) heartbeats() []*Heartbeat {
	hs := make([]*Heartbeat, d.count("heartbeats"))
	for i := range hs {
		h := d.heartbeat()
		if d.err != nil {
			return nil
		}
		hs[i] = &h
	}
	return hs
}

func (d *opDecoder) opIDs() []OpID {
	ids := make([]OpID, d.count("ids"))
	for i := range ids {
		if ids[i] = d.opID(); d.err != nil {
			return nil
		}
	}
	return ids
}

// overlayOnly says whether e is an overlay frame with nothing but
// heartbeats (none nil), ids and a digest in its body: what
// appendOverlayFrame writes as the codec would.
func (e *Envelope) overlayOnly() bool {
	if _, ok := overlayKinds[e.Kind]; !ok || e.Overlay == nil || len(e.Ops) > 0 ||
		e.Hello != nil || e.Accept != nil || e.Refuse != nil || !e.VV.IsZero() || len(e.Peers) > 0 ||
		e.Ping != nil || e.Tunnels != nil || e.reachBodies() != 0 {
		return false
	}
	o := e.Overlay
	if len(o.Sample) > 0 || len(o.Suspicions) > 0 {
		return false
	}
	for _, h := range o.Heartbeats {
		if h == nil {
			return false
		}
	}
	return true
}

// appendOverlayFrame appends e, for which overlayOnly holds, as the codec
// writes it: the fields of the body in key order, empty ones left out.
func appendOverlayFrame(b []byte, e *Envelope) []byte {
	o := e.Overlay
	b = appendText(append(b, 0xa2, 1), e.Kind)
	fields := uint64(0)
	for _, set := range [...]bool{len(o.Heartbeats) > 0, len(o.IDs) > 0, len(o.Digest) > 0} {
		if set {
			fields++
		}
	}
	b = appendHead(append(b, 0x18, 40), 5, fields)
	if len(o.Heartbeats) > 0 {
		b = appendHead(append(b, 2), 4, uint64(len(o.Heartbeats)))
		for _, h := range o.Heartbeats {
			b = h.appendCBOR(b)
		}
	}
	if len(o.IDs) > 0 {
		b = appendHead(append(b, 3), 4, uint64(len(o.IDs)))
		for _, id := range o.IDs {
			b = id.appendCBOR(b)
		}
	}
	if len(o.Digest) > 0 {
		b = append(appendHead(append(b, 4), 2, uint64(len(o.Digest))), o.Digest...)
	}
	return b
}
