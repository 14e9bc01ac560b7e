package batch

import (
	"regexp"
	"strings"
)

// sbatchWord is what a word of slurm-job.vk.io/flags may hold. sbatch reads #SBATCH lines with
// its own word splitting, so anything a shell would treat specially (quotes, $, `, ;, |, &,
// redirections, globs, backslashes) is refused rather than guessed at.
var sbatchWord = regexp.MustCompile(`^[A-Za-z0-9._,:=/@%+-]+$`)

// nodeOwnedFlags are the sbatch options the node sets itself: the shadow finds the job by its
// name (the pod UID), and the node reads the job's output where it put it.
var nodeOwnedFlags = map[string]bool{
	"--job-name": true, "-J": true,
	"--output": true, "-o": true,
	"--error": true, "-e": true,
}

// sbatchFlags splits the pod's slurm-job.vk.io/flags on whitespace as the plugin does: a word
// starting with '-' begins a flag and the words after it that do not are its values, so
// "-t 2800 --mem=2G" gives "-t 2800" and "--mem=2G", one #SBATCH line each.
func sbatchFlags(annotation string) ([]string, error) {
	if strings.ContainsAny(annotation, "\n\r") {
		return nil, refusef("slurm-job.vk.io/flags holds a line break; each flag becomes one #SBATCH line, so a line break would add lines to the batch script")
	}
	var flags []string
	for _, word := range strings.Fields(annotation) {
		if !sbatchWord.MatchString(word) {
			return nil, refusef("slurm-job.vk.io/flags: %q holds characters other than letters, digits and ._,:=/@%%+- (the site refuses shell metacharacters in sbatch flags)", word)
		}
		if !strings.HasPrefix(word, "-") {
			if len(flags) == 0 {
				return nil, refusef("slurm-job.vk.io/flags: %q comes before any flag (flags start with '-')", word)
			}
			flags[len(flags)-1] += " " + word
			continue
		}
		if key := flagKey(word); nodeOwnedFlags[key] {
			return nil, refusef("slurm-job.vk.io/flags: %s is set by the node (the job is named after the pod UID and writes its output to the pod's job directory)", key)
		}
		flags = append(flags, word)
	}
	return flags, nil
}

// flagKey is the option a flag word sets: "--mem" for "--mem=2G", "-J" for "-Jname".
func flagKey(word string) string {
	if strings.HasPrefix(word, "--") {
		key, _, _ := strings.Cut(word, "=")
		return key
	}
	return word[:min(2, len(word))]
}
