package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// JSONError describes an encoding/json decoding error in the terms of
// the JSON a client sent: a value of the wrong kind names its field,
// the kind it must be and the kind it was ("field "port" must be an
// integer from 0 to 65535, got number 70000.5"); a document that is not
// the object expected says so, calling it whole ("the body", "the
// record"). encoding/json's own text names Go types ("cannot unmarshal
// array into Go value of type struct { Domain *string ... }",
// "[]messages.Subnet"), which tell a client nothing and show the node's
// internals.
func JSONError(err error, whole string) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	want := jsonKind(te.Type)
	if te.Field == "" {
		return fmt.Sprintf("%s must be %s, got %s", whole, want, te.Value)
	}
	return fmt.Sprintf("field %q must be %s, got %s", te.Field, want, te.Value)
}

// jsonKind is what a value decoded into t must be, as JSON.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return fmt.Sprintf("an integer from %d to %d", int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return fmt.Sprintf("an array of %d", t.Len())
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "another JSON value"
}
