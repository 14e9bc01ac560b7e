// Package batch renders a pod as the job directory interLink's Slurm plugin would prepare for
// it: the batch script (#SBATCH lines, the site's CommandPrefix, the pod's
// slurm-job.vk.io/flags and pre-exec, `singularity exec` for a container with a command and
// `singularity run` for one without) and the files the script needs beside it (volumes, env
// files, the stand-in page). It is pure: it reads the pod and the objects the pod refers to
// through lookups, and writes nothing; the caller materialises the files and submits the
// script.
//
// Every value of the pod that reaches the shell goes through one rule, quote: valid UTF-8
// without NUL, then single-quoted (the site's CommandPrefix is the site's own shell, verbatim). What the script cannot express safely (a flag with shell metacharacters,
// a path holding ',' or ':' that a bind list would split) is refused with a *Refusal, which the
// node reports as the pod's failure; other errors (a ConfigMap not there yet) are worth a retry.
package batch
