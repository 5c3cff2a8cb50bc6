package health

// Status is the state of one alert, as Netdata names it.
type Status string

// The statuses an alert can have.
const (
	StatusClear         Status = "CLEAR"
	StatusWarning       Status = "WARNING"
	StatusCritical      Status = "CRITICAL"
	StatusUndefined     Status = "UNDEFINED"
	StatusUninitialized Status = "UNINITIALIZED"
)

// Alert is the current state of one rule on one chart (Netdata's alarm).
type Alert struct {
	ID                     uint32
	Name                   string // e.g. "10min_cpu_usage", "ram_in_use", "disk_space_usage", "load_average_15", "used_swap"
	Chart                  string
	Context                string
	Family                 string
	Class, Component, Type string
	Units                  string
	Info                   string
	Status                 Status
	Value                  float64 // NaN when undefined
	Warn, Crit             string  // the expressions shown, e.g. "$this > 75"
	LastStatusChange       int64   // unix seconds
	LastUpdated            int64
	UpdateEvery            int
	// Silenced is always false: the engine has no silencing (see the
	// package doc); the field keeps Netdata's alarm layout.
	Silenced bool

	// How the value is computed, as Netdata shows it. Calc rules
	// ("$used * 100 / ($used + $free)") use the newest point; lookup rules
	// aggregate the last -LookupAfter seconds of LookupDimensions (summed
	// per point) with LookupMethod.
	Calc             string // "" for lookup rules
	LookupDimensions string // e.g. "user,system,softirq,irq,guest"; "" for calc rules
	LookupMethod     string // "average", "max"
	LookupAfter      int    // e.g. -600
	LookupOptions    string // "unaligned"
}

// Transition is one recorded status change (Netdata's alarm_log entry).
type Transition struct {
	UniqueID                     uint64
	AlertID                      uint32
	Name, Chart, Context, Family string
	When                         int64 // unix seconds
	OldStatus, NewStatus         Status
	OldValue, NewValue           float64
	Units, Info                  string
}
