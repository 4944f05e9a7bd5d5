import pytest

from pyg_fastload.lightning.command import main

from ..helpers import usage_exit


@pytest.mark.reliability(
    fault='a bad argument or input to `prepare`, `partition` or `bench` '
          '(a missing dataset directory, an option of another source, a '
          'bad value)',
    behaviour="one line naming the command and the fix (a dataset never "
              "made: check the path or create it, not 're-create'), exit "
              "status 2 as argparse's own errors and `fit`'s config errors "
              "(was: 1, the status of a crash)")
@pytest.mark.parametrize('words, match', [
    (['partition', '{tmp}/none', '--num-parts', '2', '--out', '{tmp}/p'],
     r"^pyg-fastload partition: error: .*none: no such dataset directory; "
     r"check the path, or create the dataset with `pyg-fastload prepare"),
    (['prepare', '--preset', 'tiny', '--raw-dir', '{tmp}', '{tmp}/ds'],
     r'^pyg-fastload prepare: error: --raw-dir only applies to --ogb'),
    (['bench', 'loader', '--preset', 'tiny', '--warmup', '0',
      '--cache-dir', '{tmp}/cache'],
     r"pyg-fastload bench loader: error: '--warmup 0': the first batch"),
])
def test_usage_errors_exit_with_status_2(words, match, tmp_path, capsys):
    with usage_exit(capsys, match):
        main([word.format(tmp=tmp_path) for word in words])
