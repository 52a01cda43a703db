"""What runs on a node: the one bash script every backend starts there.

`shell` quotes words and values; `command` applies the command rule (a string is a shell
line, a list runs exactly as given); `script` assembles the rendezvous lines, the
environment, files, in-job steps, hooks and the program line.
"""
