package main

import (
	"bytes"
	"os"
	"os/exec"
	"syscall"
)

// runInRoot runs the image's program path with args inside root, as the
// image's user (65532), and returns what it printed. Nothing outside root
// is visible to it: a file the image lacks is missing. Root changes the root
// directory itself; another user does it in a user and mount namespace of
// its own.
func runInRoot(root, path string, args ...string) (string, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	attr := &syscall.SysProcAttr{Chroot: root}
	if os.Geteuid() == 0 {
		attr.Credential = &syscall.Credential{Uid: 65532, Gid: 65532}
	} else {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 65532, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 65532, HostID: os.Getegid(), Size: 1}}
	}
	cmd.SysProcAttr = attr
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
