package messages

import (
	"fmt"

	"github.com/fxamacker/cbor/v2"
)

// The codec modes are built once: fxamacker/cbor modes are safe for
// concurrent use and expensive to create.
var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

// MaxDecodeBytes bounds what Decode accepts; frames are limited to 1 MiB.
const MaxDecodeBytes = 1 << 20

func init() {
	var err error
	encMode, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(fmt.Sprintf("cbor enc mode: %v", err))
	}
	decMode, err = cbor.DecOptions{
		MaxNestedLevels:   16,
		MaxArrayElements:  1 << 16,
		MaxMapPairs:       1 << 16,
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(fmt.Sprintf("cbor dec mode: %v", err))
	}
}

// Marshal encodes v in deterministic CBOR.
func Marshal(v any) ([]byte, error) { return encMode.Marshal(v) }

// Unmarshal decodes strict CBOR into v: unknown fields, duplicate map keys
// and oversized input are errors.
func Unmarshal(b []byte, v any) error {
	if len(b) > MaxDecodeBytes {
		return fmt.Errorf("cbor: %d bytes exceeds limit %d", len(b), MaxDecodeBytes)
	}
	return decMode.Unmarshal(b, v)
}
