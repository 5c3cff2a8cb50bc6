package main

import (
	"errors"
	"io"
)

func runInvite(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("invite: not wired yet")
}
