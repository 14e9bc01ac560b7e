// Package doctor checks a site for one SSH virtual node of a policy before pods fail there: it
// logs in to the login node with the system's ssh and the shadow's own options
// (inject.SSHOptions, given the files the user names) and tries, for real, what the shadow
// will need: the login host reachable, its host key, the login, TCP forwarding or the exec
// connect command, a route to a compute node, Slurm's commands and the reverse tunnel's hop.
// Each check is a Check with its status, what was seen and, for a failure, the remedy in the
// user guide's voice (tunnelstate's catalogue where the shadow would report the same reason).
// It owns those checks and how ssh's output is read for them; printing them is the CLI's.
package doctor
