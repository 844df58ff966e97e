package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// Upstream runs mount(8), whose mount.nfs helper turns the options into the kernel's mount(2)
// call. The images of the test cluster have no such helper, so this program makes the call
// itself: the generic options become mount flags, the options of mount(8) that never reach the
// kernel are dropped, and the rest go to the NFS client as its data string, with addr= set to
// the server's address as mount.nfs would set it.

// mountFlags are the generic options and the mount(2) flag each sets (or clears, when false).
var mountFlags = map[string]struct {
	flag uintptr
	set  bool
}{
	"ro":          {syscall.MS_RDONLY, true},
	"rw":          {syscall.MS_RDONLY, false},
	"nosuid":      {syscall.MS_NOSUID, true},
	"suid":        {syscall.MS_NOSUID, false},
	"nodev":       {syscall.MS_NODEV, true},
	"dev":         {syscall.MS_NODEV, false},
	"noexec":      {syscall.MS_NOEXEC, true},
	"exec":        {syscall.MS_NOEXEC, false},
	"sync":        {syscall.MS_SYNCHRONOUS, true},
	"async":       {syscall.MS_SYNCHRONOUS, false},
	"dirsync":     {syscall.MS_DIRSYNC, true},
	"noatime":     {syscall.MS_NOATIME, true},
	"atime":       {syscall.MS_NOATIME, false},
	"nodiratime":  {syscall.MS_NODIRATIME, true},
	"diratime":    {syscall.MS_NODIRATIME, false},
	"relatime":    {syscall.MS_RELATIME, true},
	"norelatime":  {syscall.MS_RELATIME, false},
	"strictatime": {syscall.MS_STRICTATIME, true},
	"mand":        {syscall.MS_MANDLOCK, true},
	"nomand":      {syscall.MS_MANDLOCK, false},
}

// userspaceOptions are options of mount(8) and fstab that the kernel never sees.
var userspaceOptions = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "user": true, "nouser": true, "users": true,
	"owner": true, "group": true, "nofail": true, "_netdev": true,
}

// kernelMount is one mount(2) call.
type kernelMount struct {
	flags uintptr
	data  string
}

// kernelMountFor splits the mount options (each may hold several, comma separated) into flags
// and the NFS data string and adds addr=<serverAddress> unless an addr= is given.
func kernelMountFor(options []string, serverAddress string) kernelMount {
	var m kernelMount
	var data []string
	hasAddr := false
	for _, opts := range options {
		for opt := range strings.SplitSeq(opts, ",") {
			opt = strings.TrimSpace(opt)
			if f, ok := mountFlags[opt]; ok {
				if f.set {
					m.flags |= f.flag
				} else {
					m.flags &^= f.flag
				}
				continue
			}
			if opt == "" || userspaceOptions[opt] || strings.HasPrefix(opt, "x-") {
				continue
			}
			hasAddr = hasAddr || strings.HasPrefix(opt, "addr=")
			data = append(data, opt)
		}
	}
	if !hasAddr {
		data = append(data, "addr="+serverAddress)
	}
	m.data = strings.Join(data, ",")
	return m
}

// resolveServer is the address of an NFS server given by name or address: the kernel's NFS
// client takes addresses only.
func resolveServer(ctx context.Context, server string) (string, error) {
	if ip := net.ParseIP(server); ip != nil {
		return ip.String(), nil
	}
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, server)
	if err != nil {
		return "", fmt.Errorf("resolving NFS server %q: %w", server, err)
	}
	if len(addrs) == 0 {
		return "", fmt.Errorf("resolving NFS server %q: no addresses", server)
	}
	return addrs[0].IP.String(), nil
}

// mountNFS mounts p.source on target with mount(2), giving up after mountTimeout as upstream
// does. Its error starts as upstream's ("mount failed: ") and names the kernel's error, the
// source, the target and the options; it wraps the kernel's errno.
func mountNFS(ctx context.Context, p *publishRequest, target string) error {
	address, err := resolveServer(ctx, p.server)
	if err != nil {
		return fmt.Errorf("mount failed: %w\nMounting arguments: -t nfs -o %s %s %s", err, strings.Join(p.options, ","), p.source, target)
	}
	km := kernelMountFor(p.options, address)
	deadline := time.After(mountTimeout)
	for _, version := range versionsToTry(p.options) {
		data := km.data
		if version != "" {
			data = "vers=" + version + "," + data
		}
		done := make(chan error, 1)
		go func() { done <- syscall.Mount(p.source, target, "nfs", km.flags, data) }()
		select {
		case err = <-done:
		case <-deadline:
			err = fmt.Errorf("time out after %s", mountTimeout)
		}
		km.data = data
		// The server speaks another version: the next one, as mount.nfs goes on.
		if !errors.Is(err, syscall.EPROTONOSUPPORT) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("mount failed: %w\nMounting command: mount(2) (no mount.nfs helper)\n"+
			"Mounting arguments: -t nfs -o %s %s %s\nKernel mount flags: %#x, data: %s",
			err, strings.Join(p.options, ","), p.source, target, km.flags, km.data)
	}
	return nil
}

// versionsToTry are the NFS versions mount.nfs tries in turn when the options name none: 4.2,
// 4.1 and 4.0, then 3 (the kernel's own default without the helper is 3, which an NFSv4-only
// server such as Manila's ganesha back ends refuses). With a version named, just that ("").
func versionsToTry(options []string) []string {
	for _, opts := range options {
		for opt := range strings.SplitSeq(opts, ",") {
			opt = strings.TrimSpace(opt)
			if strings.HasPrefix(opt, "vers=") || strings.HasPrefix(opt, "nfsvers=") || opt == "v3" || opt == "v4" || strings.HasPrefix(opt, "v4.") {
				return []string{""}
			}
		}
	}
	return []string{"4.2", "4.1", "4.0", "3"}
}

// isLikelyMountPoint tells whether path is on another device than its parent, as mount-utils
// does for the publish check; a missing path is an os.IsNotExist error.
func isLikelyMountPoint(path string) (bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, err
	}
	parent, err := os.Stat(filepath.Dir(filepath.Clean(path)))
	if err != nil {
		return false, err
	}
	return st.Sys().(*syscall.Stat_t).Dev != parent.Sys().(*syscall.Stat_t).Dev, nil
}

// corruptedMount tells errors of stat on a mount whose server went away.
func corruptedMount(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ESTALE) ||
		errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EHOSTDOWN)
}

// cleanupMountPoint unmounts path if it is a mount point (per the mount table, or a corrupted
// mount) and removes it. A missing path is done already.
func cleanupMountPoint(path string) error {
	_, err := os.Stat(path)
	if os.IsNotExist(err) {
		klog.Warningf("Warning: mount cleanup skipped because path does not exist: %v", path)
		return nil
	}
	if err != nil && !corruptedMount(err) {
		return fmt.Errorf("checking %s: %w", path, err)
	}
	mounted := err != nil // a corrupted mount is a mount
	if !mounted {
		if mounted, err = inMountTable(path); err != nil {
			return err
		}
	}
	if mounted {
		if err := unmountWithForce(path); err != nil {
			return err
		}
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// unmountWithForce unmounts path, forcing it when the plain unmount takes longer than
// unmountTimeout (a server that is gone), as upstream does.
func unmountWithForce(path string) error {
	done := make(chan error, 1)
	go func() { done <- syscall.Unmount(path, 0) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("unmounting %s: %w", path, err)
		}
		return nil
	case <-time.After(unmountTimeout):
		klog.Warningf("unmounting %s took longer than %s, forcing it", path, unmountTimeout)
		if err := syscall.Unmount(path, syscall.MNT_FORCE); err != nil {
			return fmt.Errorf("force-unmounting %s: %w", path, err)
		}
		return nil
	}
}

// inMountTable tells whether path is a mount point in /proc/self/mountinfo.
func inMountTable(path string) (bool, error) {
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	path = filepath.Clean(path)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// Field 5 is the mount point, with spaces and the like escaped in octal.
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountInfo(fields[4]) == path {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("reading the mount table: %w", err)
	}
	return false, nil
}

// unescapeMountInfo undoes the kernel's \ooo escapes of mountinfo paths.
func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
