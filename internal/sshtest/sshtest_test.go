package sshtest

import (
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestSSHDAcceptsTheClientKeyAndPinsItsHostKey(t *testing.T) {
	s := StartSSHD(t)
	args := []string{}
	for _, o := range s.ClientOptions() {
		args = append(args, "-o", o)
	}
	out, err := exec.Command("ssh", append(args, "--", s.Host, "echo logged in")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "logged in" {
		t.Fatalf("ssh to the test sshd: %v\n%s\nsshd log:\n%s", err, out, s.Log())
	}
}

func TestConfigLinesOverrideTheDefaults(t *testing.T) {
	s := StartSSHD(t, "AllowTcpForwarding no")
	args := []string{}
	for _, o := range s.ClientOptions() {
		args = append(args, "-o", o)
	}
	out, err := exec.Command("ssh", append(args, "-W", "127.0.0.1:1", "--", s.Host)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "administratively prohibited") {
		t.Fatalf("ssh -W through an sshd with AllowTcpForwarding no: err %v, output:\n%s", err, out)
	}
}

func TestStartHTTPAnswersWithTheNodeName(t *testing.T) {
	host := Loopback(t)
	port := FreePort(t, host)
	StartHTTP(t, host, port, "node07")
	resp, err := http.Get("http://" + host + ":" + strconv.Itoa(port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello from node07\n" {
		t.Fatalf("got %q", body)
	}
}
