# Bash completion for zinc: the subcommands, each subcommand's options, and file names for everything else. The
# subcommands and options are read from the zinc being completed (its --help), so this file never goes out of date;
# what it read is kept for the rest of the shell's life.
# Installed by `cmake --install` as share/bash-completion/completions/zinc; or: source tools/completion/zinc.bash

# The words of a CLI11 help text's section ("Subcommands:" or "Options:"): the first column of its lines.
_zinc_help_words() {  # zinc, section, subcommand...
  local zinc=$1 section=$2
  shift 2
  "$zinc" "$@" --help 2>/dev/null | awk -v section="$section:" '
    /^[A-Za-z].*:$/ { on = ($0 == section); next }
    on && /^  [^ ]/ {
      first = $1
      if (section == "Options:") {
        n = split(first, names, ",")
        for (i = 1; i <= n; i++) if (names[i] ~ /^-/) print names[i]
      } else print first
    }'
}

_zinc() {
  local zinc=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} cmd="" i key
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -*) ;;
      *) cmd=${COMP_WORDS[i]}; break ;;
    esac
  done
  declare -gA _zinc_cache
  key="$zinc ${cmd:-.}"
  if [ -z "${_zinc_cache[$key]+set}" ]; then
    if [ -z "$cmd" ]; then
      _zinc_cache[$key]="$(_zinc_help_words "$zinc" Subcommands) --help --version"
    else
      _zinc_cache[$key]=$(_zinc_help_words "$zinc" Options "$cmd")
    fi
  fi
  if [ -z "$cmd" ] || [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "${_zinc_cache[$key]}" -- "$cur")
  else
    # A model, a prompt file, a template: file names.
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
complete -o filenames -o bashdefault -F _zinc zinc
