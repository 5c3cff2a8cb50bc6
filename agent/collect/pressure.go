package collect

// Pressure stall information from /proc/pressure/{cpu,io,memory}
// (Netdata's proc_pressure, kernels 4.20+ with PSI enabled): per resource
// a "some" and a "full" chart of the 10/60/300-second averages
// (percentage) and of the stall time (ms/s from the total in µs).
// Kernels before 5.13 print no "full" line for cpu: that chart is then
// absent. Kernels without PSI (or booted with psi=0) have no
// /proc/pressure: no charts.

func pressureCharts() []kvChart {
	const m = "/proc/pressure"
	res := []struct {
		key, name, family string
		prio              int
	}{
		{"cpu", "CPU", "cpu", 140},
		{"io", "I/O", "disk", 190},
		{"memory", "Memory", "ram", 240},
	}
	var cs []kvChart
	for _, r := range res {
		for i, kind := range []string{"some", "full"} {
			p := r.key + "." + kind + "."
			id := "system." + r.key + "_" + kind + "_pressure"
			prio := r.prio + i*10
			cs = append(cs,
				kvDef(id, id, r.family, r.name+" "+kind+" pressure", "percentage", "line", m, prio,
					abs(p+"avg10", kind+" 10", "", 1, 1), abs(p+"avg60", kind+" 60", "", 1, 1),
					abs(p+"avg300", kind+" 300", "", 1, 1)),
				kvDef(id+"_stall_time", id+"_stall_time", r.family, r.name+" "+kind+" pressure stall time", "ms", "line", m, prio+5,
					inc(p+"total", "time", "", 1, 1000)),
			)
		}
	}
	return cs
}

func newPressure(root string) *kvColl {
	return newKVColl("pressure", pressureCharts(),
		&kvSource{path: root + "/proc/pressure/cpu", prefix: "cpu.", parse: parsePressure, optional: true},
		&kvSource{path: root + "/proc/pressure/io", prefix: "io.", parse: parsePressure, optional: true},
		&kvSource{path: root + "/proc/pressure/memory", prefix: "memory.", parse: parsePressure, optional: true},
	)
}
