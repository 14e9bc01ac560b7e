// Package syncbuf holds Buffer, a bytes.Buffer safe for concurrent use: a process writes its
// output into it while another goroutine reads what has come so far (doctor watching ssh -vv
// for a channel's confirmation, the tests' sshd and process logs).
package syncbuf
