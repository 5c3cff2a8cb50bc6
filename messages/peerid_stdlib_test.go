package messages

import (
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/big"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
)

// VerifyPeer must accept exactly what crypto/ed25519's Verify accepts:
// a node that took a signature another refused would hold ops the other
// never applies. These tests put the two side by side on the encodings
// where Ed25519 implementations are known to differ (small-order and
// mixed-order keys and R, non-canonical encodings of the key, of R and
// of S, the sign bit on x = 0, points off the curve) and, in the fuzz
// test, on mutations of valid signatures.

// p25519 is the field prime 2^255 - 19; order the group order L.
var (
	p25519 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	order  = func() *big.Int {
		l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
		return l
	}()
)

// le is v as 32 little-endian bytes (v < 2^256).
func le(v *big.Int) [32]byte {
	var out [32]byte
	b := v.Bytes()
	for i := range b {
		out[i] = b[len(b)-1-i]
	}
	return out
}

// fromLE is the integer of little-endian b.
func fromLE(b []byte) *big.Int {
	r := make([]byte, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return new(big.Int).SetBytes(r)
}

func encode(p *curve.EdwardsPoint) [32]byte {
	var c curve.CompressedEdwardsY
	c.SetEdwardsPoint(p)
	return c
}

// variants are an encoding and the others of the same point or of none:
// the sign bit flipped, and y + p where that still fits in 255 bits.
func variants(e [32]byte) [][32]byte {
	out := [][32]byte{e}
	flipped := e
	flipped[31] ^= 0x80
	out = append(out, flipped)
	sign := e[31] & 0x80
	y := e
	y[31] &= 0x7f
	if yp := new(big.Int).Add(fromLE(y[:]), p25519); yp.BitLen() <= 255 {
		nc := le(yp)
		nc[31] |= sign
		out = append(out, nc)
	}
	return out
}

// secretKey is a scalar a, its public point [a]B and that point's
// encoding.
type secretKey struct {
	a   *scalar.Scalar
	pub *curve.EdwardsPoint
}

func newSecretKey(seed byte) secretKey {
	var wide [64]byte
	for i := range wide {
		wide[i] = seed + byte(i)*7
	}
	a, _ := scalar.NewFromBytesModOrderWide(wide[:])
	return secretKey{a: a, pub: curve.NewEdwardsPoint().MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)}
}

// signAs makes a signature with key k's scalar over msg, but hashed with
// the public encoding pubEnc and with R = [r]B + rT (rT a torsion point
// or the identity): a valid one when pubEnc is k's and rT the identity,
// and the mixed-order cases otherwise.
func signAs(k secretKey, pubEnc [32]byte, rT *curve.EdwardsPoint, msg []byte, nonce byte) [64]byte {
	var wide [64]byte
	for i := range wide {
		wide[i] = nonce ^ byte(i*13)
	}
	r, _ := scalar.NewFromBytesModOrderWide(wide[:])
	R := curve.NewEdwardsPoint().MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
	R.Add(R, rT)
	rEnc := encode(R)
	h := sha512.New()
	h.Write(rEnc[:])
	h.Write(pubEnc[:])
	h.Write(msg)
	kh, _ := scalar.NewFromBytesModOrderWide(h.Sum(nil))
	s := scalar.New().Mul(kh, k.a)
	s.Add(s, r)
	var sig [64]byte
	copy(sig[:32], rEnc[:])
	_ = s.ToBytes(sig[32:])
	return sig
}

// sVariants are sig's S as it is, plus L and plus 2L (non-canonical,
// still 256 bits), and S = 0.
func sVariants(sig [64]byte) [][64]byte {
	out := [][64]byte{sig}
	s := fromLE(sig[32:])
	for _, add := range []int64{1, 2} {
		v := new(big.Int).Add(s, new(big.Int).Mul(order, big.NewInt(add)))
		if v.BitLen() <= 256 {
			c := sig
			e := le(v)
			copy(c[32:], e[:])
			out = append(out, c)
		}
	}
	zero := sig
	clear(zero[32:])
	return append(out, zero)
}

func TestVerifyPeerMatchesStdlibOnEdgeCases(t *testing.T) {
	torsion := curve.EIGHT_TORSION[:]
	k := newSecretKey(1)
	kEnc := encode(k.pub)

	// Keys: the eight small-order points, k, and k plus each torsion
	// point (mixed order), every encoding variant of each; and encodings
	// of no point.
	var keys [][32]byte
	for _, T := range torsion {
		keys = append(keys, variants(encode(T))...)
		keys = append(keys, variants(encode(curve.NewEdwardsPoint().Add(k.pub, T)))...)
	}
	keys = append(keys, variants(kEnc)...)
	for y := int64(2); len(keys) < 80; y++ { // y values with no x on the curve
		e := le(big.NewInt(y))
		var pt curve.EdwardsPoint
		if c := curve.CompressedEdwardsY(e); func() error { _, err := pt.SetCompressedY(&c); return err }() != nil {
			keys = append(keys, e)
		}
	}

	msgs := [][]byte{nil, []byte("m"), []byte("peerdns op"), make([]byte, 200)}
	var checked, accepted int
	check := func(pub [32]byte, msg []byte, sig [64]byte) {
		t.Helper()
		want := ed25519.Verify(pub[:], msg, sig[:])
		got := VerifyPeer(hex.EncodeToString(pub[:]), msg, sig[:])
		if got != want {
			t.Fatalf("key %x msg %q sig %x: VerifyPeer %v, crypto/ed25519 %v", pub, msg, sig, got, want)
		}
		checked++
		if got {
			accepted++
		}
	}
	for _, pub := range keys {
		for mi, msg := range msgs {
			// Signatures by k's scalar hashed with this key's encoding,
			// R torsion-free or with each torsion component; each with
			// its S variants.
			for ti, T := range torsion {
				for _, sig := range sVariants(signAs(k, pub, T, msg, byte(mi*8+ti))) {
					check(pub, msg, sig)
				}
			}
			// R any small-order point (and its variants), S = 0: valid
			// for a small-order key when [k](-A) happens to be R.
			for _, T := range torsion {
				for _, rEnc := range variants(encode(T)) {
					var sig [64]byte
					copy(sig[:32], rEnc[:])
					check(pub, msg, sig)
				}
			}
		}
	}
	// The comparison means something only if both outcomes came up, and
	// more than the one key's own valid signatures were accepted.
	if accepted <= len(msgs) || accepted == checked {
		t.Fatalf("%d of %d accepted: the cases do not exercise both outcomes", accepted, checked)
	}
	t.Logf("%d signatures compared, %d accepted by both", checked, accepted)
}

func FuzzVerifyPeerMatchesStdlib(f *testing.F) {
	f.Add(byte(1), []byte("op"), uint16(0), byte(0), uint16(0), byte(0))
	f.Add(byte(2), []byte(""), uint16(31), byte(0x80), uint16(63), byte(0x10))
	f.Add(byte(3), []byte("x"), uint16(40), byte(1), uint16(95), byte(0xf0))
	f.Fuzz(func(t *testing.T, seed byte, msg []byte, at1 uint16, x1 byte, at2 uint16, x2 byte) {
		k := newSecretKey(seed)
		pub := encode(k.pub)
		sig := signAs(k, pub, curve.NewEdwardsPoint().Identity(), msg, seed)
		// Two byte flips anywhere in the key (0-31) or the signature
		// (32-95).
		var buf [96]byte
		copy(buf[:32], pub[:])
		copy(buf[32:], sig[:])
		buf[int(at1)%96] ^= x1
		buf[int(at2)%96] ^= x2
		want := ed25519.Verify(buf[:32], msg, buf[32:])
		if got := VerifyPeer(hex.EncodeToString(buf[:32]), msg, buf[32:]); got != want {
			t.Fatalf("key %x sig %x msg %q: VerifyPeer %v, crypto/ed25519 %v", buf[:32], buf[32:], msg, got, want)
		}
	})
}

// The key's own signature made here is one crypto/ed25519 makes too:
// the helpers above build real Ed25519 signatures.
func TestSignAsIsEd25519(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	pub := priv.Public().(ed25519.PublicKey)
	for _, msg := range [][]byte{nil, []byte("a"), []byte(fmt.Sprint(42))} {
		k := newSecretKey(9)
		kEnc := encode(k.pub)
		sig := signAs(k, kEnc, curve.NewEdwardsPoint().Identity(), msg, 3)
		if !ed25519.Verify(kEnc[:], msg, sig[:]) {
			t.Fatalf("signAs made a signature crypto/ed25519 refuses over %q", msg)
		}
		if !VerifyPeer(hex.EncodeToString(pub), msg, ed25519.Sign(priv, msg)) {
			t.Fatalf("VerifyPeer refused crypto/ed25519's own signature over %q", msg)
		}
	}
}
