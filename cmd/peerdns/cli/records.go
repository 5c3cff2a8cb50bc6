package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// record is one local DNS record as GET /api/local-dns lists it.
type record map[string]any

func (r record) str(k string) string {
	switch v := r[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func (r record) index() int {
	f, _ := r["index"].(float64)
	return int(f)
}

// value is the record's data in zone-file order.
func (r record) value() string {
	switch strings.ToUpper(r.str("type")) {
	case "MX":
		return r.str("preference") + " " + r.str("exchange")
	case "SRV":
		return strings.Join([]string{r.str("priority"), r.str("weight"), r.str("port"), r.str("target")}, " ")
	}
	if d := r.str("data"); d != "" {
		return d
	}
	// Other types: their fields, by name, so nothing is hidden.
	var parts []string
	for k := range r {
		switch k {
		case "index", "name", "type", "class", "ttl":
			continue
		}
		parts = append(parts, k+"="+r.str(k))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (e *env) records(pos []string, ttl int, only func(...string) error) error {
	if len(pos) == 0 {
		if err := only(); err != nil {
			return err
		}
		return e.listRecords()
	}
	sub, args := pos[0], pos[1:]
	switch sub {
	case "add":
		if err := only("ttl"); err != nil {
			return err
		}
		if len(args) < 3 {
			return fail(ExitUsage, `usage: peerdns records add NAME TYPE VALUE [--ttl N] (MX: "PREF HOST", SRV: "PRIO WEIGHT PORT TARGET")`)
		}
		body, err := recordBody(args[0], args[1], strings.Join(args[2:], " "), ttl)
		if err != nil {
			return err
		}
		if err := e.c.post("/api/add-local-dns", body, nil); err != nil {
			return err
		}
		return e.done("added", args[0]+" "+strings.ToUpper(args[1]))
	case "remove":
		if err := only(); err != nil {
			return err
		}
		if len(args) < 1 || len(args) > 2 {
			return fail(ExitUsage, "usage: peerdns records remove NAME [TYPE]")
		}
		typ := ""
		if len(args) == 2 {
			typ = args[1]
		}
		return e.removeRecords(args[0], typ)
	}
	return fail(ExitUsage, "unknown records command %q (add, remove)", sub)
}

// recordBody is the add-local-dns body for one record written as on a
// command line.
func recordBody(name, typ, value string, ttl int) (map[string]any, error) {
	if ttl < 0 {
		return nil, fail(ExitUsage, "--ttl must be 0 or more")
	}
	typ = strings.ToUpper(typ)
	body := map[string]any{"name": name, "type": typ, "ttl": ttl}
	f := strings.Fields(value)
	num := func(s, what string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fail(ExitUsage, "%s record: %s %q is not a number", typ, what, s)
		}
		return n, nil
	}
	switch typ {
	case "A", "AAAA", "CNAME", "TXT", "NS", "PTR":
		body["data"] = value
	case "MX":
		if len(f) != 2 {
			return nil, fail(ExitUsage, `MX record: VALUE is "PREFERENCE EXCHANGE", e.g. "10 mail.home"`)
		}
		p, err := num(f[0], "preference")
		if err != nil {
			return nil, err
		}
		body["preference"], body["exchange"] = p, f[1]
	case "SRV":
		if len(f) != 4 {
			return nil, fail(ExitUsage, `SRV record: VALUE is "PRIORITY WEIGHT PORT TARGET", e.g. "10 5 5060 sip.home"`)
		}
		var n [3]int
		for i, what := range []string{"priority", "weight", "port"} {
			v, err := num(f[i], what)
			if err != nil {
				return nil, err
			}
			n[i] = v
		}
		body["priority"], body["weight"], body["port"], body["target"] = n[0], n[1], n[2], f[3]
	default:
		return nil, fail(ExitUsage, "records add knows A, AAAA, CNAME, TXT, NS, PTR, MX and SRV; add %s records through the admin API (POST /api/add-local-dns)", typ)
	}
	return body, nil
}

func (e *env) localDNS() ([]record, json.RawMessage, error) {
	var raw json.RawMessage
	if err := e.c.getJSON("/api/local-dns", &raw); err != nil {
		return nil, nil, err
	}
	var body struct {
		Records []record `json:"records"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, nil, fail(ExitNoNode, "%s answered /api/local-dns with something unexpected: %v", e.c.addr, err)
	}
	return body.Records, raw, nil
}

func (e *env) listRecords() error {
	recs, raw, err := e.localDNS()
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(raw)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "INDEX\tNAME\tCLASS\tTYPE\tTTL\tVALUE")
	for _, r := range recs {
		class := r.str("class")
		if class == "" {
			class = "IN"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", r.index(), cell(r.str("name")), cell(class), cell(r.str("type")), cell(r.str("ttl")), cell(r.value()))
	}
	return w.Flush()
}

// removeRecords deletes every record of name (of typ, when given),
// highest index first, so the indexes still to delete do not move.
func (e *env) removeRecords(name, typ string) error {
	recs, _, err := e.localDNS()
	if err != nil {
		return err
	}
	norm := func(s string) string { return strings.TrimSuffix(strings.ToLower(s), ".") }
	var idx []int
	for _, r := range recs {
		if norm(r.str("name")) == norm(name) && (typ == "" || strings.EqualFold(r.str("type"), typ)) {
			idx = append(idx, r.index())
		}
	}
	if len(idx) == 0 {
		what := name
		if typ != "" {
			what += " " + strings.ToUpper(typ)
		}
		return fail(ExitNotFound, "no local record %s", what)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(idx)))
	for _, i := range idx {
		if err := e.c.post("/api/delete-local-dns", map[string]any{"index": i}, nil); err != nil {
			return err
		}
	}
	if e.json {
		return e.printJSON(map[string]any{"ok": true, "action": "removed", "name": name, "removed": len(idx)})
	}
	_, err = fmt.Fprintf(e.stdout, "removed %d record(s) of %s\n", len(idx), name)
	return err
}
