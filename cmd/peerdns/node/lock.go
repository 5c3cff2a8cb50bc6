package node

// LockData takes the lock a node takes on its data folder, on the folder
// dir of a running what ("agent": `peerdns agent` locks DATA/agent), and
// returns its release. A second one on a locked folder gets an error
// naming it.
func LockData(dir, what string) (release func(), err error) {
	l, err := lockData(dir, what)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
