package admin

import (
	"testing"

	"peerdns/actors/settings"
)

// decodeSettings and every setting's validator take any bytes without
// panicking; what decodes either has values or errors, never both empty.
func FuzzDecodeSettings(f *testing.F) {
	for _, seed := range []string{
		`{"settings":{"LOG_LEVEL":"debug"}}`, `{"settings":{"DNS_CACHE_SIZE":500,"X":true}}`, `{"settings":{}}`,
		`{"settings":null}`, `{"settings":{"A":[1]}}`, `[]`, ``, `{"settings":{"SUBNETS":"[{\"base\":\"10.0.0.0\",\"cidr\":8}]"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		vals, errs := decodeSettings(body)
		if vals == nil && len(errs) == 0 {
			t.Fatalf("%q: no values and no errors", body)
		}
		for _, d := range settings.Catalog {
			for _, v := range vals {
				_ = d.Validate(v)
			}
		}
	})
}
