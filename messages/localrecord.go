package messages

// Local DNS records: the JSON shape the admin API reads and writes,
// validation, conversion to miekg/dns resource records, and the
// immutable snapshot the localdns actor publishes for the answer path.
//
// JSON fields per type (the admin spec shows A, MX and SRV; the others
// are our choice, documented in dns/README.md):
//
//	A, AAAA           data (IPv4 / IPv6 address)
//	CNAME, NS, PTR    data (target name)
//	TXT               data (text; split into 255-byte strings on the wire)
//	MX                preference, exchange
//	SRV               priority, weight, port, target
//	SOA               mname, rname, serial, refresh, retry, expire, minimum
//	CAA               flag, tag, value
//	OTHER             rrtype (number), data (RDATA as hex)
//
// Every record also has name, type, class (IN or CH, default IN) and ttl
// (seconds, default 300).

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/miekg/dns"
)

// DefaultRecordTTL is used when a record is written without a ttl.
const DefaultRecordTTL = 300

// MaxRecordTTL is the largest TTL allowed (RFC 2181 §8).
const MaxRecordTTL = 1<<31 - 1

// RecordTypes lists the record types the API accepts, in the spec's order.
var RecordTypes = []string{"A", "AAAA", "CNAME", "MX", "TXT", "SRV", "SOA", "CAA", "NS", "PTR", "OTHER"}

// ErrInvalidRecord wraps every validation failure.
var ErrInvalidRecord = errors.New("invalid record")

// LocalRecord is one local DNS record. Name is stored lowercased without the
// trailing dot; names inside the data (targets) are stored the same way.
type LocalRecord struct {
	Name  string
	Type  string // one of RecordTypes
	Class string // IN or CH
	TTL   uint32

	Data string // A, AAAA, CNAME, NS, PTR, TXT; OTHER: hex RDATA

	Preference uint16 // MX
	Exchange   string // MX

	Priority uint16 // SRV
	Weight   uint16 // SRV
	Port     uint16 // SRV
	Target   string // SRV

	MName, RName                            string // SOA
	Serial, Refresh, Retry, Expire, Minimum uint32 // SOA

	Flag  uint8  // CAA
	Tag   string // CAA
	Value string // CAA

	RRType uint16 // OTHER: the numeric RR type
}

// input is the decoding shape: pointers tell "absent" from zero.
type input struct {
	Name       *string `json:"name"`
	Type       *string `json:"type"`
	Class      *string `json:"class"`
	TTL        *int64  `json:"ttl"`
	Data       *string `json:"data"`
	Preference *int64  `json:"preference"`
	Exchange   *string `json:"exchange"`
	Priority   *int64  `json:"priority"`
	Weight     *int64  `json:"weight"`
	Port       *int64  `json:"port"`
	Target     *string `json:"target"`
	MName      *string `json:"mname"`
	RName      *string `json:"rname"`
	Serial     *int64  `json:"serial"`
	Refresh    *int64  `json:"refresh"`
	Retry      *int64  `json:"retry"`
	Expire     *int64  `json:"expire"`
	Minimum    *int64  `json:"minimum"`
	Flag       *int64  `json:"flag"`
	Tag        *string `json:"tag"`
	Value      *string `json:"value"`
	RRType     *int64  `json:"rrtype"`
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRecord, fmt.Sprintf(format, a...))
}

// ParseLocalRecord decodes one record from JSON and validates it. The error names
// the offending field.
func ParseLocalRecord(b []byte) (LocalRecord, error) {
	var in input
	if err := json.Unmarshal(b, &in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return LocalRecord{}, invalid("%s", JSONError(err, "the record"))
		}
		return LocalRecord{}, invalid("bad JSON: %s", JSONError(err, "the record"))
	}
	return in.record()
}

// UnmarshalJSON decodes and validates a record.
func (r *LocalRecord) UnmarshalJSON(b []byte) error {
	rec, err := ParseLocalRecord(b)
	if err != nil {
		return err
	}
	*r = rec
	return nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func num(name string, p *int64, lo, hi int64, required bool, def int64) (int64, error) {
	if p == nil {
		if required {
			return 0, invalid("%s is required", name)
		}
		return def, nil
	}
	if *p < lo || *p > hi {
		return 0, invalid("%s must be between %d and %d, got %d", name, lo, hi, *p)
	}
	return *p, nil
}

func (in *input) record() (LocalRecord, error) {
	var r LocalRecord
	var err error
	r.Name, err = CleanOwner(str(in.Name))
	if err != nil {
		return r, err
	}
	r.Type = strings.ToUpper(strings.TrimSpace(str(in.Type)))
	if r.Type == "" {
		return r, invalid("type is required")
	}
	if !knownType(r.Type) {
		return r, invalid("type %q is not one of %s", r.Type, strings.Join(RecordTypes, ", "))
	}
	r.Class = strings.ToUpper(strings.TrimSpace(str(in.Class)))
	switch r.Class {
	case "":
		r.Class = "IN"
	case "IN", "CH":
	default:
		return r, invalid("class %q is not supported (IN or CH)", r.Class)
	}
	ttl, err := num("ttl", in.TTL, 0, MaxRecordTTL, false, DefaultRecordTTL)
	if err != nil {
		return r, err
	}
	r.TTL = uint32(ttl)

	u16 := func(name string, p *int64) (uint16, error) {
		v, err := num(name, p, 0, 65535, true, 0)
		return uint16(v), err
	}
	u32 := func(name string, p *int64) (uint32, error) {
		v, err := num(name, p, 0, 1<<32-1, true, 0)
		return uint32(v), err
	}
	switch r.Type {
	case "A", "AAAA":
		d := strings.TrimSpace(str(in.Data))
		if d == "" {
			return r, invalid("data (the %s address) is required", r.Type)
		}
		ip, perr := netip.ParseAddr(d)
		if perr != nil || ip.Zone() != "" {
			return r, invalid("data %q is not an IP address", d)
		}
		if r.Type == "A" && !ip.Is4() {
			return r, invalid("data %q is not an IPv4 address", d)
		}
		if r.Type == "AAAA" && !ip.Is6() {
			return r, invalid("data %q is not an IPv6 address", d)
		}
		r.Data = ip.String()
	case "CNAME", "NS", "PTR":
		if r.Data, err = CleanRecordName("data", str(in.Data), false); err != nil {
			return r, err
		}
	case "TXT":
		if in.Data == nil {
			return r, invalid("data (the text) is required")
		}
		if len(*in.Data) > 4000 {
			return r, invalid("data is longer than 4000 bytes")
		}
		r.Data = *in.Data
	case "MX":
		if r.Preference, err = u16("preference", in.Preference); err != nil {
			return r, err
		}
		if r.Exchange, err = CleanRecordName("exchange", str(in.Exchange), true); err != nil {
			return r, err
		}
	case "SRV":
		if r.Priority, err = u16("priority", in.Priority); err != nil {
			return r, err
		}
		if r.Weight, err = u16("weight", in.Weight); err != nil {
			return r, err
		}
		if r.Port, err = u16("port", in.Port); err != nil {
			return r, err
		}
		if r.Target, err = CleanRecordName("target", str(in.Target), true); err != nil {
			return r, err
		}
	case "SOA":
		if r.MName, err = CleanRecordName("mname", str(in.MName), true); err != nil {
			return r, err
		}
		if r.RName, err = CleanRecordName("rname", str(in.RName), true); err != nil {
			return r, err
		}
		for _, f := range []struct {
			name string
			p    *int64
			dst  *uint32
		}{{"serial", in.Serial, &r.Serial}, {"refresh", in.Refresh, &r.Refresh}, {"retry", in.Retry, &r.Retry}, {"expire", in.Expire, &r.Expire}, {"minimum", in.Minimum, &r.Minimum}} {
			if *f.dst, err = u32(f.name, f.p); err != nil {
				return r, err
			}
		}
	case "CAA":
		v, err := num("flag", in.Flag, 0, 255, false, 0)
		if err != nil {
			return r, err
		}
		r.Flag = uint8(v)
		r.Tag = strings.TrimSpace(str(in.Tag))
		if r.Tag == "" || len(r.Tag) > 15 {
			return r, invalid("tag must be 1 to 15 letters or digits (e.g. issue, issuewild, iodef)")
		}
		for _, c := range []byte(r.Tag) {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				return r, invalid("tag %q must be letters and digits only", r.Tag)
			}
		}
		if in.Value == nil {
			return r, invalid("value is required")
		}
		if len(escapeOctet(*in.Value)) > maxCAAValue {
			return r, invalid("value is longer than %d bytes (a backslash counts as two)", maxCAAValue)
		}
		r.Value = *in.Value
	case "OTHER":
		t, err := num("rrtype", in.RRType, 1, 65535, true, 0)
		if err != nil {
			return r, err
		}
		r.RRType = uint16(t)
		if name, ok := namedType(r.RRType); ok {
			return r, invalid("rrtype %d is %s: use type %s", t, name, name)
		}
		if isMetaType(r.RRType) {
			return r, invalid("rrtype %d is a meta type and cannot be stored", t)
		}
		d := strings.ToLower(strings.Join(strings.Fields(str(in.Data)), ""))
		raw, herr := hex.DecodeString(d)
		if herr != nil {
			return r, invalid("data must be the RDATA in hex: %v", herr)
		}
		if len(raw) > 4000 {
			return r, invalid("data is longer than 4000 bytes")
		}
		r.Data = d
	}
	// A final check that the record packs (and, for OTHER, that RDATA of a
	// type miekg/dns knows parses as that type).
	rr, err := r.RR()
	if err != nil {
		return r, err
	}
	buf := make([]byte, 8192)
	if _, err := dns.PackRR(rr, buf, 0, nil, false); err != nil {
		return r, invalid("record does not pack: %v", err)
	}
	return r, nil
}

func knownType(t string) bool {
	for _, k := range RecordTypes {
		if k == t {
			return true
		}
	}
	return false
}

// namedType reports whether t is one of the types with its own JSON shape.
func namedType(t uint16) (string, bool) {
	for _, k := range RecordTypes[:len(RecordTypes)-1] {
		if dns.StringToType[k] == t {
			return k, true
		}
	}
	return "", false
}

func isMetaType(t uint16) bool {
	switch t {
	case dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeIXFR, dns.TypeAXFR, dns.TypeMAILA, dns.TypeMAILB, dns.TypeANY:
		return true
	}
	return t >= 128 && t <= 255 // RFC 6895 §3.1: Q and meta types
}

// CleanRecordName validates a domain name and returns it lowercased without the
// trailing dot. rootOK allows "." (returned as "").
//
// A name is printable ASCII: DNS matches names ASCII-case-insensitively
// (RFC 4343), so a name lowercased by Unicode rules ("Ä.home" stored as
// "ä.home") would never answer the name it was given, resolvers ask for
// an IDN in its xn-- form anyway, and a control character would reach
// listings and terminals as one.
func CleanRecordName(field, s string, rootOK bool) (string, error) {
	return cleanName(ErrInvalidRecord, field, s, rootOK)
}

// CleanName validates a name that is not part of a record (a domain
// whose cache is cleared, a version preference's domain) as
// CleanRecordName does; its errors wrap ErrInvalid ("invalid request"),
// not ErrInvalidRecord.
func CleanName(field, s string) (string, error) {
	return cleanName(ErrInvalid, field, s, false)
}

// cleanName is CleanRecordName with errors that wrap kind.
func cleanName(kind error, field, s string, rootOK bool) (string, error) {
	invalid := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, a...))
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", invalid("%s is required", field)
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r > '~' }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return "", invalid("%s %q has %q: names are printable ASCII (an IDN goes in its xn-- form)", field, s, r)
	}
	if s == "." {
		if rootOK {
			return "", nil
		}
		return "", invalid("%s cannot be the root", field)
	}
	if strings.ContainsAny(s, " \t\\\"()") {
		return "", invalid("%s %q has characters not allowed in a name", field, s)
	}
	fq := dns.Fqdn(s)
	if _, ok := dns.IsDomainName(fq); !ok || len(fq) > 254 {
		return "", invalid("%s %q is not a valid domain name", field, s)
	}
	if strings.Contains(fq, "..") {
		return "", invalid("%s %q has an empty label", field, s)
	}
	for _, l := range dns.SplitDomainName(fq) {
		if l == "*" {
			return "", invalid("%s %q: \"*\" is only allowed as the first label of a record's name (a wildcard, e.g. *.dev.lan)", field, s)
		}
	}
	return strings.ToLower(strings.TrimSuffix(fq, ".")), nil
}

// CleanOwner validates a record's name: a domain name, or a wildcard
// "*.<name>" (RFC 4592: "*" as the leftmost label only, and a name below
// it); returned as CleanRecordName returns names.
func CleanOwner(s string) (string, error) {
	t := strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(t, "*."); ok {
		if rest == "" || rest == "." {
			return "", invalid("name %q: a wildcard needs a name below it (e.g. *.dev.lan)", s)
		}
		base, err := CleanRecordName("name", rest, false)
		if err != nil {
			return "", err
		}
		return "*." + base, nil
	}
	return CleanRecordName("name", s, false)
}

// WildcardBase is the name a wildcard owner covers the children of
// ("*.dev.lan" → "dev.lan", true); ok is false for other names.
func WildcardBase(name string) (string, bool) {
	return strings.CutPrefix(name, "*.")
}

// FQDN is name with the trailing dot ("" is the root).
func FQDN(name string) string { return name + "." }

// Qtype is the DNS type number of the record.
func (r LocalRecord) Qtype() uint16 {
	if r.Type == "OTHER" {
		return r.RRType
	}
	return dns.StringToType[r.Type]
}

// Qclass is the DNS class number of the record.
func (r LocalRecord) Qclass() uint16 {
	if r.Class == "CH" {
		return dns.ClassCHAOS
	}
	return dns.ClassINET
}

// RR converts the record to a miekg/dns resource record.
func (r LocalRecord) RR() (dns.RR, error) {
	hdr := dns.RR_Header{Name: FQDN(r.Name), Rrtype: r.Qtype(), Class: r.Qclass(), Ttl: r.TTL}
	var rr dns.RR
	switch r.Type {
	case "A":
		ip, err := netip.ParseAddr(r.Data)
		if err != nil || !ip.Is4() {
			return nil, invalid("data %q is not an IPv4 address", r.Data)
		}
		b := ip.As4()
		rr = &dns.A{Hdr: hdr, A: b[:]}
	case "AAAA":
		ip, err := netip.ParseAddr(r.Data)
		if err != nil || !ip.Is6() {
			return nil, invalid("data %q is not an IPv6 address", r.Data)
		}
		b := ip.As16()
		rr = &dns.AAAA{Hdr: hdr, AAAA: b[:]}
	case "CNAME":
		rr = &dns.CNAME{Hdr: hdr, Target: FQDN(r.Data)}
	case "NS":
		rr = &dns.NS{Hdr: hdr, Ns: FQDN(r.Data)}
	case "PTR":
		rr = &dns.PTR{Hdr: hdr, Ptr: FQDN(r.Data)}
	case "TXT":
		rr = &dns.TXT{Hdr: hdr, Txt: splitTXT(r.Data)}
	case "MX":
		rr = &dns.MX{Hdr: hdr, Preference: r.Preference, Mx: FQDN(r.Exchange)}
	case "SRV":
		rr = &dns.SRV{Hdr: hdr, Priority: r.Priority, Weight: r.Weight, Port: r.Port, Target: FQDN(r.Target)}
	case "SOA":
		rr = &dns.SOA{Hdr: hdr, Ns: FQDN(r.MName), Mbox: FQDN(r.RName), Serial: r.Serial, Refresh: r.Refresh, Retry: r.Retry, Expire: r.Expire, Minttl: r.Minimum}
	case "CAA":
		rr = &dns.CAA{Hdr: hdr, Flag: r.Flag, Tag: r.Tag, Value: escapeOctet(r.Value)}
	case "OTHER":
		raw := &dns.RFC3597{Hdr: hdr, Rdata: r.Data}
		// Round-trip through the wire so that RDATA of a type miekg/dns
		// knows is checked against that type's format.
		buf := make([]byte, 8192)
		n, err := dns.PackRR(raw, buf, 0, nil, false)
		if err != nil {
			return nil, invalid("data does not pack: %v", err)
		}
		parsed, _, err := dns.UnpackRR(buf[:n], 0)
		if err != nil {
			return nil, invalid("data is not valid RDATA for type %d: %v", r.RRType, err)
		}
		return parsed, nil
	default:
		return nil, invalid("type %q is not supported", r.Type)
	}
	return rr, nil
}

// splitTXT cuts text into the 255-byte character-strings TXT RDATA is
// made of (RFC 1035 §3.3.14). miekg/dns reads backslashes as escapes, so
// they are escaped here to keep the text literal.
func splitTXT(s string) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for len(s) > 0 {
		n := min(255, len(s))
		out = append(out, escapeTXT(s[:n]))
		s = s[n:]
	}
	return out
}

func escapeTXT(s string) string {
	if !strings.ContainsAny(s, `\"`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' || s[i] == '"' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// maxCAAValue is the longest CAA value miekg/dns packs (256*4+1 bytes of
// its presentation text, where a backslash is escaped as two).
const maxCAAValue = 1025

// escapeOctet escapes the backslashes of s: miekg/dns packs a CAA value
// as presentation text (a backslash starts an escape, "\065" is "A"),
// and the value is literal text.
func escapeOctet(s string) string { return strings.ReplaceAll(s, `\`, `\\`) }

// Fields is the record as the admin API shows it: common fields plus the
// ones of its type.
func (r LocalRecord) Fields() map[string]any {
	m := map[string]any{"name": r.Name, "type": r.Type, "class": r.Class, "ttl": r.TTL}
	switch r.Type {
	case "A", "AAAA", "CNAME", "NS", "PTR", "TXT":
		m["data"] = r.Data
	case "MX":
		m["preference"] = r.Preference
		m["exchange"] = show(r.Exchange)
	case "SRV":
		m["priority"] = r.Priority
		m["weight"] = r.Weight
		m["port"] = r.Port
		m["target"] = show(r.Target)
	case "SOA":
		m["mname"], m["rname"] = show(r.MName), show(r.RName)
		m["serial"], m["refresh"], m["retry"], m["expire"], m["minimum"] = r.Serial, r.Refresh, r.Retry, r.Expire, r.Minimum
	case "CAA":
		m["flag"], m["tag"], m["value"] = r.Flag, r.Tag, r.Value
	case "OTHER":
		m["rrtype"] = r.RRType
		m["data"] = r.Data
	}
	return m
}

// show prints the root (stored as "") as ".".
func show(name string) string {
	if name == "" {
		return "."
	}
	return name
}

// MarshalJSON writes Fields.
func (r LocalRecord) MarshalJSON() ([]byte, error) { return json.Marshal(r.Fields()) }

// CheckLocalRecords validates a whole record list: a name with a CNAME has no other
// record of its class (RFC 1034 §3.6.2, RFC 2181 §10.1), and no record
// equals another but for its TTL (an RRset holds no duplicates, RFC 2181
// §5). The records are as ParseLocalRecord returns them (names lowercased,
// data normalised), so equal data is equal fields.
func CheckLocalRecords(list []LocalRecord) error {
	type key struct{ name, class string }
	cname := map[key]bool{}
	other := map[key]bool{}
	seen := make(map[LocalRecord]bool, len(list))
	for _, r := range list {
		same := r
		same.TTL = 0
		if seen[same] {
			return invalid("%s already has this %s record", r.Name, r.Type)
		}
		seen[same] = true
		k := key{r.Name, r.Class}
		if r.Type == "CNAME" {
			if cname[k] {
				return invalid("%s already has a CNAME record; a name has at most one", r.Name)
			}
			cname[k] = true
		} else {
			other[k] = true
		}
		if cname[k] && other[k] {
			return invalid("%s: a CNAME record cannot coexist with other records of the same name", r.Name)
		}
	}
	return nil
}

// Version preferences for a p2p domain that also resolves publicly.
const (
	VersionP2P    = "p2p"
	VersionPublic = "public"
)

// LocalSnapshot is the local DNS state the answer path needs, published
// by the localdns actor. Never modified after publish.
type LocalSnapshot struct {
	Version uint64
	Records []LocalRecord     // in index order
	Prefs   map[string]string // domain → VersionP2P or VersionPublic
}
